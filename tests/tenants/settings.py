"""django-tenants on the test PostgreSQL: auth in every tenant's schema (each tenant has
its own users, pk 1 included), the idempotency records in the shared public schema."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

url = urlsplit(os.environ["TENANTS_DATABASE_URL"])  # postgres://user@host:port/name
SECRET_KEY = "tenants-test"
DEBUG = False
ALLOWED_HOSTS = [".localhost"]
USE_TZ = True
DATABASES = {
    "default": {
        "ENGINE": "django_tenants.postgresql_backend",
        "NAME": url.path.lstrip("/"),
        "USER": url.username or "postgres",
        "PASSWORD": url.password or "",
        "HOST": url.hostname or "127.0.0.1",
        "PORT": url.port or 5432,
    }
}
DATABASE_ROUTERS = ["django_tenants.routers.TenantSyncRouter"]
SHARED_APPS = [
    "django_tenants",
    "tests.tenants.customers",
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "idempotency",
]
TENANT_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]
INSTALLED_APPS = [*SHARED_APPS, *(a for a in TENANT_APPS if a not in SHARED_APPS)]
TENANT_MODEL = "customers.Customer"
TENANT_DOMAIN_MODEL = "customers.Domain"
MIDDLEWARE = [
    "django_tenants.middleware.main.TenantMainMiddleware",
    "tests.tenants.views.HeaderUserMiddleware",
]
ROOT_URLCONF = "tests.tenants.views"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
IDEMPOTENCY = {"PURGE_EVERY": None}
SILENCED_SYSTEM_CHECKS = ["idempotency.W040", "idempotency.W050"]
