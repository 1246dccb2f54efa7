"""A plain Django project that uses django-idempotency and none of its integrations."""

from __future__ import annotations

import os

import dj_database_url

SECRET_KEY = "no-extras-tests"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "idempotency",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.no_extras.urls"
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or "sqlite:///:memory:", conn_max_age=0
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["NAME"] = ":memory:"
    DATABASES["default"]["TEST"] = {"NAME": ":memory:"}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Django's own tasks framework (Django 6.0+): tasks run in-process
TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
