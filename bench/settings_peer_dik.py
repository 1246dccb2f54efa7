"""django-idempotency-key 1.3.0, as its README sets it up for several processes.

``IdempotencyKeyMiddleware`` (a key on every unsafe request), responses kept in a
django-redis cache (``CacheKeyStorage``; the default ``MemoryKeyStorage`` is per
process, wrong under two gunicorn workers) and the cross-process Redis lock
(``MultiProcessRedisLock``; the default ``ThreadLock`` is per process). The other
settings keep their defaults: a replay answers ``409`` (``CONFLICT_STATUS_CODE``).
The peer has no database backend.
"""

from __future__ import annotations

from typing import Any

from bench.env import REDIS_URL
from bench.settings_peers import *  # noqa: F403
from bench.settings_peers import MIDDLEWARE

MIDDLEWARE = [*MIDDLEWARE, "idempotency_key.middleware.IdempotencyKeyMiddleware"]

IDEMPOTENCY_KEY: dict[str, Any] = {
    "STORAGE": {
        "CLASS": "idempotency_key.storage.CacheKeyStorage",
        "CACHE_NAME": "default",
    },
    "LOCK": {
        "CLASS": "idempotency_key.locks.redis.MultiProcessRedisLock",
        "LOCATION": REDIS_URL,
        "NAME": "bench-dik-lock",
    },
}
