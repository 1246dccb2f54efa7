"""Fault-injection helpers of the tests: private Redis and MariaDB servers and a dead port.

The servers come from ``chaos.services`` (the chaos suite's own), each on a free
loopback port with its own directory, so a test may freeze, kill, stop or restart one
without touching the shared Redis or MariaDB.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from chaos.services import (
    PrivateMariaDB,
    PrivateRedis,
    free_port,
    mariadb_binaries,
    redis_server_binary,
)
from tests.support.services import REQUIRE_SERVICES
from tests.support.stores import REDIS_STORE, using

#: Short socket timeouts, so a frozen or dead Redis fails a call in half a second.
TIMEOUTS = {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}


def redis_cache(url: str) -> dict[str, Any]:
    """A cache entry (Django's own ``RedisCache``) for ``url`` with short timeouts."""
    return {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": url,
        "OPTIONS": TIMEOUTS,
    }


def caches_with(alias: str, url: str) -> dict[str, Any]:
    return {**settings.CACHES, alias: redis_cache(url)}


def dead_redis_url() -> str:
    """A Redis URL on a loopback port nothing listens on: every call is refused."""
    return f"redis://127.0.0.1:{free_port()}/0"


@contextmanager
def private_redis(*, aof: bool = False, extra: tuple[str, ...] = ()) -> Iterator[PrivateRedis]:
    if redis_server_binary() is None:
        reason = "needs redis-server (the binary) for a private Redis"
        if REQUIRE_SERVICES:
            pytest.fail(f"required service missing: {reason}")
        pytest.skip(reason)
    server = PrivateRedis(aof=aof, extra=extra)
    try:
        server.start()
        yield server
    finally:
        server.close()


@contextmanager
def private_mariadb() -> Iterator[PrivateMariaDB]:
    """A ``mariadbd`` of the test's own (``chaos.services.PrivateMariaDB``), started."""
    if mariadb_binaries() is None:
        reason = "needs mariadbd and mariadb-install-db for a private MariaDB"
        if REQUIRE_SERVICES:
            pytest.fail(f"required service missing: {reason}")
        pytest.skip(reason)
    server = PrivateMariaDB()
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.close()


@contextmanager
def database_alias_at(alias: str, server: PrivateMariaDB, name: str) -> Iterator[str]:
    """Point the database alias ``alias`` (a mirror of "default" in tests/settings.py; the
    test lists it in its ``databases``) at database ``name`` of the private ``server``
    (created, the library's tables migrated), with a short connect timeout; pointed back
    at the end. Threads open their connections from the new settings."""
    from django.core.management import call_command
    from django.db import connections

    server.create_database(name)
    saved = connections.settings[alias]
    default = connections["default"].settings_dict
    params = {
        **default,
        "NAME": name,
        "HOST": "127.0.0.1",
        "PORT": str(server.port),
        "USER": "root",
        "PASSWORD": "",
        "OPTIONS": {**default.get("OPTIONS", {}), "connect_timeout": 2},
    }
    connections[alias].close()
    connections[alias].settings_dict = params  # this thread's connection
    connections.settings[alias] = params  # the connections other threads open
    try:
        call_command("migrate", "idempotency", database=alias, verbosity=0)
        yield alias
    finally:
        connections[alias].close()
        connections[alias].settings_dict = saved
        connections.settings[alias] = saved


def dead_redis_store(**extra: Any) -> Any:
    """Settings with RedisStore on a Redis nothing listens on (``extra`` added)."""
    return override_settings(
        CACHES=caches_with("private", dead_redis_url()),
        IDEMPOTENCY={**using(REDIS_STORE, cache="private"), **extra},
    )


def assert_unavailable(response: Any) -> None:
    """A 503 problem+json ``idempotency-store-unavailable`` with a Retry-After."""
    assert response.status_code == 503
    assert response["Content-Type"] == "application/problem+json"
    assert int(response["Retry-After"]) >= 1
    assert json.loads(response.content)["code"] == "idempotency-store-unavailable"
