"""Settings of the sample project, read from the environment.

Every value has a safe development default so ``make run`` works on a fresh
machine with nothing but Python: SQLite, the local-memory cache and Celery in
eager mode. Point the environment at real services to run it for real::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/idempotency
    DATABASE_URL=mysql://root@127.0.0.1:3306/idempotency   (MySQL 8 or MariaDB 10.6+)
    REDIS_URL=redis://127.0.0.1:6379/0
    CELERY_BROKER_URL=redis://127.0.0.1:6379/1
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url

from config.defaults import DEV_GATEWAY_SECRET, DEV_SECRET_KEY

BASE_DIR = Path(__file__).resolve().parent.parent


def truthy(value: str) -> bool:
    """A switch's text as a bool: ``1``, ``true``, ``yes`` or ``on`` (any case) is True."""
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else truthy(value)


#: ``mariadb://`` is the README's other spelling of ``mysql://`` (dj-database-url knows only
#: the latter): the same backend, the same post-processing.
dj_database_url.register("mariadb", "django.db.backends.mysql")

#: MySQL and MariaDB: utf8mb4 (four-byte characters; MySQL's "utf8" is three bytes at
#: most) and strict mode (a value that does not fit is an error, never silently cut). The
#: isolation level stays Django's default, READ COMMITTED (docs/howto/mysql.md says why).
MYSQL_OPTIONS = {
    "charset": "utf8mb4",
    "init_command": (
        "SET sql_mode = 'STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'"
    ),
}


def database_from_url(url: str) -> dict[str, Any]:
    """A DATABASES entry for ``postgres://user:pass@host:port/name``,
    ``mysql://user:pass@host:port/name`` (or ``mariadb://``) or ``sqlite:///path``, parsed
    by dj-database-url; the query string gives the driver's ``OPTIONS``.

    On top of dj-database-url: ``CONN_MAX_AGE`` from the environment, ``TEST_DATABASE_NAME``,
    psycopg's ``server_side_binding`` and ``prepare_threshold`` typed as Django expects
    them (``1``/``yes`` are True, ``none`` is None; anything else but a number is refused
    at startup), server-side cursors off behind a transaction pooler
    (``DATABASE_TRANSACTION_POOLING=1``), and MySQL's charset and ``sql_mode``."""
    try:
        config: dict[str, Any] = dict(
            dj_database_url.parse(
                url,
                conn_max_age=int(os.environ.get("CONN_MAX_AGE", "0")),
                # behind PgBouncer in transaction pooling mode a cursor cannot outlive its
                # transaction: DATABASE_TRANSACTION_POOLING=1 turns server-side cursors off
                disable_server_side_cursors=env_bool("DATABASE_TRANSACTION_POOLING", False),
            )
        )
    except dj_database_url.UnknownSchemeError as exc:
        raise ValueError(f"Unsupported DATABASE_URL scheme: {url.split(':', 1)[0]!r}") from exc
    engine = config["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        return {"ENGINE": engine, "NAME": config["NAME"]}
    config["PORT"] = str(config.get("PORT") or "")
    options: dict[str, Any] = dict(config.get("OPTIONS") or {})
    test: dict[str, Any] = {"NAME": os.environ.get("TEST_DATABASE_NAME") or None}
    if engine == "django.db.backends.postgresql":
        config["NAME"] = config.get("NAME") or "postgres"
        # Django's own psycopg options are typed: ?server_side_binding=true&prepare_threshold=5
        if "server_side_binding" in options:
            options["server_side_binding"] = truthy(str(options["server_side_binding"]))
        if "prepare_threshold" in options:
            threshold = str(options["prepare_threshold"]).strip()
            if threshold.lower() != "none" and not threshold.isdigit():
                raise ValueError(
                    f"DATABASE_URL: prepare_threshold is a number or none, not {threshold!r}"
                )
            options["prepare_threshold"] = None if threshold.lower() == "none" else int(threshold)
    elif engine == "django.db.backends.mysql":
        options = {**MYSQL_OPTIONS, **options}
        test["CHARSET"] = "utf8mb4"
    config.pop("CONN_HEALTH_CHECKS", None)  # Django's default (False), as before
    return {**config, "OPTIONS": options, "TEST": test}


# Development defaults; `manage.py check --deploy` fails on them (config/checks.py).
SECRET_KEY = os.environ.get("SECRET_KEY", DEV_SECRET_KEY)
DEBUG = env_bool("DEBUG", True)
ALLOWED_HOSTS = [
    h for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "idempotency",
    "idempotency.contrib.drf",
    "idempotency.contrib.prometheus",
    "accounts",
    "orders",
    "payments",
    "config.apps.SampleProjectConfig",
]

MIDDLEWARE = [
    # first: it sees every answer last, and turns any error that is not JSON yet (URL
    # 404s, 500s, Django's 400/413, DEBUG's HTML pages) into problem+json
    "config.middleware.ProblemDetailsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}")
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")
CACHES: dict[str, dict[str, Any]]
if REDIS_URL and env_bool("REDIS_CLUSTER", False):
    # REDIS_URL names any node of a Redis Cluster: Django's own RedisCache speaks to one
    # server, so the cache is django-redis' with redis-py's cluster client
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                "SOCKET_CONNECT_TIMEOUT": 2,
                "SOCKET_TIMEOUT": 2,
                "CONNECTION_FACTORY": "idempotency.redis_cluster.ClusterConnectionFactory",
            },
        }
    }
elif REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            # bounded waits: an unreachable or frozen Redis answers 503, never hangs
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "config.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "config.problems.problem_exception_handler",
    "COERCE_DECIMAL_TO_STRING": True,
    # one rendering for every JSON answer, the library's problem details included:
    # compact, non-ASCII escaped (idempotency.exceptions.render_problem)
    "COMPACT_JSON": True,
    "UNICODE_JSON": False,
    # OpenAPI: bodies from the views' Input/OutputSerializer, plus the Idempotency-Key
    # contract of every protected view (header, Idempotent-Replayed, 400/409/422 problems).
    "DEFAULT_SCHEMA_CLASS": "config.schema.SampleAutoSchema",
}

# /api/schema/ and /api/docs/: Swagger UI served from this server's static files
# (drf-spectacular-sidecar), never from a CDN.
SPECTACULAR_SETTINGS = {
    "TITLE": "django-idempotency sample API",
    "DESCRIPTION": (
        "Orders, payments and accounts whose writes are safe to retry: send an "
        "Idempotency-Key header, and a retry replays the first response."
    ),
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery: without a broker the tasks run eagerly in-process, so the embedded
# default needs nothing running. Set CELERY_BROKER_URL to use a real worker.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "memory://")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", "") or None
CELERY_TASK_ALWAYS_EAGER = env_bool(
    "CELERY_TASK_ALWAYS_EAGER", "CELERY_BROKER_URL" not in os.environ
)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "purge-idempotency-records": {
        "task": "idempotency.purge_expired_records",
        "schedule": 3600.0,
    },
    "purge-idempotency-submit-tokens": {
        "task": "idempotency.purge_expired_submit_tokens",
        "schedule": 3600.0,
    },
    # Runs under the lock "reconcile-ledger" (see accounts/tasks.py): a second
    # scheduler firing at the same time skips instead of running twice.
    # The transactional outbox of order.paid (orders/outbox.py): whatever the on-commit
    # publish missed (a broker that was down) goes out within a few seconds of its return.
    "relay-order-outbox": {
        "task": "orders.relay_outbox",
        "schedule": 5.0,
    },
    # Sent outbox messages are kept a week for the admin, then deleted (pending never).
    "purge-sent-order-outbox": {
        "task": "orders.purge_sent_outbox",
        "schedule": 3600.0,
    },
    "reconcile-ledger": {
        "task": "accounts.reconcile_ledger",
        "schedule": 900.0,
    },
}

# The sample counts outcomes in Prometheus metrics, served at /metrics.
IDEMPOTENCY: dict[str, Any] = {"METRICS": env_bool("IDEMPOTENCY_METRICS", True)}
# The stores, configured as CACHES: the database store by default. IDEMPOTENCY_STORE
# names another backend for the "default" alias (CI and the chaos suite run the sample
# on RedisStore, which uses the django-redis cache "default"), IDEMPOTENCY_RESPONSE_CACHE
# puts a response cache in front of the database store.
_store: dict[str, Any] = {
    "BACKEND": os.environ.get("IDEMPOTENCY_STORE") or "idempotency.stores.database.DatabaseStore"
}
if os.environ.get("IDEMPOTENCY_RESPONSE_CACHE"):
    _store["OPTIONS"] = {"response_cache": os.environ["IDEMPOTENCY_RESPONSE_CACHE"]}
IDEMPOTENCY["STORES"] = {"default": _store}
if os.environ.get("IDEMPOTENCY_LEASE"):  # seconds; the chaos suite shortens it
    IDEMPOTENCY["LEASE"] = float(os.environ["IDEMPOTENCY_LEASE"])
if os.environ.get("IDEMPOTENCY_TTL"):  # seconds; the soak shortens it to see the purge work
    IDEMPOTENCY["TTL"] = float(os.environ["IDEMPOTENCY_TTL"])
# Distributed locks (the scheduled jobs): Redis when there is one, else PostgreSQL
# advisory locks (IDEMPOTENCY_LOCK_BACKEND: "redis", "postgres" or "mysql" chooses).
# With neither (the embedded default: SQLite, no Redis) LOCKS is left unset and the
# sample's jobs lock with a host-local file lock, which is enough there: a SQLite
# database lives on one host (accounts/locks.py).
LOCK_BACKENDS = {
    "redis": "idempotency.locks.RedisLockBackend",
    "postgres": "idempotency.locks.PostgresLockBackend",
    "mysql": "idempotency.locks.MySQLLockBackend",
}
_lock_backend = os.environ.get("IDEMPOTENCY_LOCK_BACKEND") or (
    "redis"
    if REDIS_URL
    else {"django.db.backends.postgresql": "postgres", "django.db.backends.mysql": "mysql"}.get(
        DATABASES["default"]["ENGINE"], ""
    )
)
if _lock_backend:
    IDEMPOTENCY["LOCKS"] = {"default": {"BACKEND": LOCK_BACKENDS.get(_lock_backend, _lock_backend)}}

# Shared secret of the payment gateway: it signs each callback's body with HMAC-SHA256
# (POST /api/payments/callback/, header X-Gateway-Signature). Set it in production: with
# DEBUG off the default is empty (every callback is refused), and `check --deploy` fails
# on a missing, short or development secret.
PAYMENT_GATEWAY_SECRET = os.environ.get(
    "PAYMENT_GATEWAY_SECRET", DEV_GATEWAY_SECRET if DEBUG else ""
)

# One handler, on the root logger. Django's own "django" logger keeps its level but loses
# the handlers Django gives it by default (a console handler while DEBUG is on, and
# mail_admins): its records reach the root's handler once, where they were printed twice.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    "loggers": {"django": {"handlers": [], "propagate": True}},
}
