"""What the stores hold, read raw: every record's columns and every value of the test
Redis database (and of a local-memory cache), to show a secret is nowhere in them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.cache import caches

from idempotency.models import IdempotencyRecord


def _redis_values() -> list[bytes]:
    from django_redis import get_redis_connection

    client = get_redis_connection("default")
    values: list[bytes] = []
    for name in client.scan_iter("*"):
        kind = client.type(name)
        if kind == b"string":
            values.append(client.get(name) or b"")
        elif kind == b"hash":
            values.extend(client.hgetall(name).values())
        elif kind in (b"list", b"set", b"zset"):
            values.append(repr(client.dump(name)).encode())
    return values


def stored_values() -> list[bytes]:
    """Every value the database table, the Redis database and a local-memory default cache
    hold."""
    values: list[bytes] = []
    for row in IdempotencyRecord.objects.values_list(
        "scope", "key", "route", "response_headers", "response_body", "recovery_data"
    ):
        for column in row:
            if isinstance(column, memoryview | bytes):
                values.append(bytes(column))
            else:
                values.append(repr(column).encode())
    backend = settings.CACHES["default"]["BACKEND"]
    if backend.startswith("django_redis"):
        values += _redis_values()
    else:
        local: Any = caches["default"]
        values += [bytes(v) for v in getattr(local, "_cache", {}).values()]
    return values


def stored_anywhere(secret: bytes) -> bool:
    """Whether ``secret`` is in any value the stores hold."""
    return any(secret in value for value in stored_values())
