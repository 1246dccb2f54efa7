"""Which services this run has, and what a test does without one.

Tests marked ``server_db`` need ``DATABASE_URL`` to point at a server database
(PostgreSQL, or MySQL/MariaDB): real concurrency. Those marked ``postgres`` or ``mysql``
test that database's own features and need it. Tests marked ``redis`` need
``REDIS_URL``. Without them a test is skipped with the reason, unless
``IDEMPOTENCY_TEST_REQUIRE_SERVICES=1`` (as in CI): then a missing service fails it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
REQUIRE_SERVICES = os.environ.get("IDEMPOTENCY_TEST_REQUIRE_SERVICES") == "1"
BROKER_URL = os.environ.get("CELERY_TEST_BROKER_URL", "redis://127.0.0.1:6379/14")


def missing(reason: str) -> None:
    """Skip the test, or fail it where the services are required."""
    if REQUIRE_SERVICES:
        pytest.fail(f"required service missing: {reason}")
    pytest.skip(reason)


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


def on_mysql() -> bool:
    """MySQL or MariaDB (Django's ``mysql`` backend serves both)."""
    return connection.vendor == "mysql"


#: The databases whose servers run the concurrency tests (``server_db``).
SERVER_DATABASES = frozenset({"postgresql", "mysql"})


def on_server_database() -> bool:
    return connection.vendor in SERVER_DATABASES


def redis_url() -> str:
    return str(getattr(settings, "REDIS_URL", "") or "")


def broker_redis() -> Any:
    """A redis-py client of the Celery test broker's database (the workers' counters)."""
    import redis

    client = redis.Redis.from_url(BROKER_URL)
    try:
        client.ping()
    except redis.RedisError as exc:
        missing(f"needs the Celery test broker at {BROKER_URL}: {exc}")
    return client


def tests_database_url() -> str:
    """``DATABASE_URL`` of the database the tests run on (pytest-django's ``test_<name>``)."""
    data = connection.settings_dict
    user = quote(data.get("USER") or "")
    password = quote(data.get("PASSWORD") or "")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = data.get("HOST") or "127.0.0.1"
    port = f":{data['PORT']}" if data.get("PORT") else ""
    scheme = "mysql" if connection.vendor == "mysql" else "postgres"
    return f"{scheme}://{auth}{host}{port}/{quote(data['NAME'])}"


def mysql_transactions(condition: str) -> int:
    """Transactions of other sessions on the test database (MySQL/MariaDB) meeting the
    SQL ``condition`` on ``information_schema.INNODB_TRX t``. InnoDB refreshes that table
    only once it has been left unread for 0.1 s: poll it less often than that."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM information_schema.INNODB_TRX t"
            " JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id"
            f" WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id <> CONNECTION_ID() AND {condition}"
        )
        return int(cursor.fetchone()[0])
