"""The stores and modes the tests are parametrised over."""

from __future__ import annotations

from typing import Any

import pytest

DB_STORE = "idempotency.stores.DatabaseStore"
REDIS_STORE = "idempotency.stores.RedisStore"
CACHE_STORE = "idempotency.stores.CacheStore"

#: every store and mode the HTTP layer runs on; ids are used in test names
STORE_VARIANTS: dict[str, dict[str, Any]] = {
    "db-atomic": {"STORE": DB_STORE, "MODE": "atomic"},
    "db-lease": {"STORE": DB_STORE, "MODE": "lease"},
    "db-cached": {"STORE": DB_STORE, "MODE": "atomic", "RESPONSE_CACHE": "default"},
    "redis": {"STORE": REDIS_STORE, "MODE": "lease"},
    "cache": {"STORE": CACHE_STORE, "MODE": "lease"},
}


def variant_params(*names: str) -> list[Any]:
    """``pytest.param`` of each variant of ``STORE_VARIANTS`` named (all by default), the
    Redis one marked ``redis``."""
    return [
        pytest.param(name, id=name, marks=[pytest.mark.redis] if name == "redis" else [])
        for name in names or STORE_VARIANTS
    ]


def store_params(*names: str) -> list[Any]:
    """``pytest.param`` of the dotted path of each store named (``db``, ``redis``, ``cache``)."""
    paths = {"db": DB_STORE, "redis": REDIS_STORE, "cache": CACHE_STORE}
    return [
        pytest.param(paths[name], id=name, marks=[pytest.mark.redis] if name == "redis" else [])
        for name in names
    ]


#: every store idempotent functions and tasks run on
ALL_STORES = store_params("db", "redis", "cache")
