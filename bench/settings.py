"""Settings of the benchmark server: production-like and minimal.

DEBUG off, persistent database connections, no sessions, no admin, no debug toolbar;
one middleware (the SQL statement counter). DRF with token authentication only.
Our variants pick their store and mode per view (``bench/benchapp/ours.py``), so
``IDEMPOTENCY`` stays at its defaults, but for what ``BENCH_IDEMPOTENCY`` (a JSON object)
sets: ``{"BODY_CODEC": "idempotency.codecs.FernetCodec", "BODY_ENCRYPTION_KEYS": [...]}``
prices encryption at rest. Peers run in their own processes with
``bench/settings_peer_*.py``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from bench.env import REDIS_URL, database_settings

SECRET_KEY = "bench-only-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "rest_framework",
    "rest_framework.authtoken",
    "idempotency",
    "idempotency.contrib.drf",
    "bench.benchapp",
]

MIDDLEWARE = ["bench.benchapp.views.QueryCountMiddleware"]

ROOT_URLCONF = "bench.urls"
WSGI_APPLICATION = "bench.wsgi.application"

DATABASES = {"default": database_settings()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES: dict[str, Any] = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}

USE_TZ = True
TIME_ZONE = "UTC"
USE_I18N = False

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_THROTTLE_CLASSES": [],
}

IDEMPOTENCY: dict[str, Any] = json.loads(os.environ.get("BENCH_IDEMPOTENCY") or "{}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
