"""Fault-injection helpers of the tests: private Redis servers and a dead port.

The servers come from ``chaos.services`` (the chaos suite's own), each on a free
loopback port with its own directory, so a test may freeze, kill or restart one without
touching the shared Redis.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from chaos.services import PrivateRedis, free_port, redis_server_binary
from tests.support.services import REQUIRE_SERVICES
from tests.support.stores import REDIS_STORE

#: Short socket timeouts, so a frozen or dead Redis fails a call in half a second.
TIMEOUTS = {"SOCKET_CONNECT_TIMEOUT": 0.5, "SOCKET_TIMEOUT": 0.5}


def redis_cache(url: str) -> dict[str, Any]:
    """A django-redis cache entry for ``url`` with short timeouts."""
    return {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": url,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient", **TIMEOUTS},
    }


def caches_with(alias: str, url: str) -> dict[str, Any]:
    return {**settings.CACHES, alias: redis_cache(url)}


def dead_redis_url() -> str:
    """A Redis URL on a loopback port nothing listens on: every call is refused."""
    return f"redis://127.0.0.1:{free_port()}/0"


@contextmanager
def private_redis(*, aof: bool = False) -> Iterator[PrivateRedis]:
    if redis_server_binary() is None:
        reason = "needs redis-server (the binary) for a private Redis"
        if REQUIRE_SERVICES:
            pytest.fail(f"required service missing: {reason}")
        pytest.skip(reason)
    server = PrivateRedis(aof=aof)
    try:
        server.start()
        yield server
    finally:
        server.close()


def dead_redis_store(**extra: Any) -> Any:
    """Settings with RedisStore on a Redis nothing listens on (``extra`` added)."""
    return override_settings(
        CACHES=caches_with("private", dead_redis_url()),
        IDEMPOTENCY={"STORE": REDIS_STORE, "REDIS_ALIAS": "private", **extra},
    )


def assert_unavailable(response: Any) -> None:
    """A 503 problem+json ``idempotency-store-unavailable`` with a Retry-After."""
    assert response.status_code == 503
    assert response["Content-Type"] == "application/problem+json"
    assert int(response["Retry-After"]) >= 1
    assert json.loads(response.content)["code"] == "idempotency-store-unavailable"
