"""Test settings: the sample project's, plus a small app of test-only views and models."""

from __future__ import annotations

import os

from config.settings import *  # noqa: F403
from config.settings import DATABASES, INSTALLED_APPS

INSTALLED_APPS = [
    *INSTALLED_APPS,
    "idempotency.contrib.ninja",
    "idempotency.contrib.otel",
    "tests.testapp",
]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# a second database for the tests of views that write to two aliases (a server database
# only; defined everywhere so those tests can be collected and skipped on SQLite)
# (not in the Celery workers the tests start: their tasks never write to it, and since
# Django 6.0 the checks a worker runs at start connect to every alias, which on MySQL
# fails for a test database pytest-django made for no test of the run)
if os.environ.get("IDEMPOTENCY_TEST_WORKER") != "1" and DATABASES["default"]["ENGINE"] in {
    "django.db.backends.postgresql",
    "django.db.backends.mysql",
}:
    DATABASES["ledger"] = {
        **DATABASES["default"],
        "NAME": f"{DATABASES['default']['NAME']}_ledger",
    }
else:
    DATABASES["ledger"] = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}

# A second database for the read-replica tests (tests/scale/test_replicas.py): created
# only when a test asks for it, holding stale or empty copies of the primary's tables.
# Elsewhere a local-memory SQLite stands in (MySQL has no in-memory database, and since
# Django 6.0 the check framework, which a Celery worker runs at start, connects to every
# alias).
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    DATABASES["replica"] = {
        **DATABASES["default"],
        "NAME": f"{DATABASES['default']['NAME']}_replica",
        "TEST": {"NAME": None},
    }
else:
    DATABASES["replica"] = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": ":memory:",
        "TEST": {"NAME": None},
    }

# The PgBouncer tests (tests/scale/test_pgbouncer.py) point this alias at a PgBouncer
# they start in front of the test database; until then it mirrors "default".
DATABASES["bouncer"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}

# The outage tests of a private server (tests/utils/test_outages_mariadb.py) point this alias at
# a mariadbd they start, stop and start again; until then it mirrors "default".
DATABASES["outage"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}

# Django's tasks (django.tasks; on Django 5.2 the django-tasks backport), for the tests of
# @idempotent_django_task (tests/contrib/): the immediate backend by default (runs at
# enqueue, cannot defer), the dummy one (keeps what is enqueued, can defer), and
# django-tasks-db's, which the tests' db_worker processes run (any queue name).
try:
    import django.tasks  # noqa: F401

    _TASKS_PACKAGE = "django.tasks"
except ImportError:
    _TASKS_PACKAGE = "django_tasks"
    INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks"]
INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks_db"]
TASKS = {
    "default": {"BACKEND": f"{_TASKS_PACKAGE}.backends.immediate.ImmediateBackend"},
    "dummy": {"BACKEND": f"{_TASKS_PACKAGE}.backends.dummy.DummyBackend"},
    "database": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": []},
}
