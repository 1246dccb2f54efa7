"""What the stores hold, read raw: every record's columns and every value of the test
Redis database (and of a local-memory cache), to show a secret is nowhere in them."""

from __future__ import annotations

import pickle
from typing import Any

from django.conf import settings
from django.core.cache import caches

from idempotency.models import IdempotencyRecord
from idempotency.stores.cache import load_record


def _with_body(value: bytes) -> list[bytes]:
    """``value``, and the body inside it where it is a ``CacheStore`` record (JSON bytes
    that keep the body in base64: a secret there is not in the raw bytes)."""
    try:
        body = load_record(value).get("body")
    except ValueError:
        return [value]
    return [value, body] if isinstance(body, bytes) else [value]


def _redis_values() -> list[bytes]:
    from idempotency.utils.redis_clients import RedisConnector

    client = RedisConnector(cache="default").client
    values: list[bytes] = []
    for name in client.scan_iter("*"):
        kind = client.type(name)
        if kind == b"string":
            values += _with_body(client.get(name) or b"")
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
    if backend in ("django_redis.cache.RedisCache", "django.core.cache.backends.redis.RedisCache"):
        values += _redis_values()
    else:
        local: Any = caches["default"]
        for pickled in getattr(local, "_cache", {}).values():
            value = pickle.loads(pickled)  # the test's own cache, written by this process
            values += _with_body(bytes(value)) if isinstance(value, bytes) else [pickled]
    return values


def stored_anywhere(secret: bytes) -> bool:
    """Whether ``secret`` is in any value the stores hold."""
    return any(secret in value for value in stored_values())
