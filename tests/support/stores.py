"""The stores and modes the tests are parametrised over."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils.module_loading import import_string

#: the BACKEND of each store
DB_STORE = "idempotency.stores.database.DatabaseStore"
REDIS_STORE = "idempotency.stores.redis.RedisStore"
CACHE_STORE = "idempotency.stores.cache.CacheStore"


#: the BACKEND of each built-in token and lock backend, by short name
TOKEN_BACKENDS = {
    "database": "idempotency.tokens.DatabaseTokens",
    "redis": "idempotency.tokens.RedisTokens",
}
LOCK_BACKENDS = {
    "redis": "idempotency.locks.RedisLockBackend",
    "postgres": "idempotency.locks.PostgresLockBackend",
    "mysql": "idempotency.locks.MySQLLockBackend",
}


def entry(backend: str, location: str | None = None, **options: Any) -> dict[str, Any]:
    """One alias' entry: ``{"BACKEND": ..., "LOCATION": ..., "OPTIONS": {...}}``."""
    found: dict[str, Any] = {"BACKEND": backend}
    if location is not None:
        found["LOCATION"] = location
    if options:
        found["OPTIONS"] = options
    return found


def stores(backend: str, **options: Any) -> dict[str, Any]:
    """``IDEMPOTENCY["STORES"]`` whose ``"default"`` alias is ``backend`` with ``options``."""
    return {"default": entry(backend, **options)}


def using(backend: str, **options: Any) -> dict[str, Any]:
    """The ``IDEMPOTENCY`` setting whose default store is ``backend`` with ``options``."""
    return {"STORES": stores(backend, **options)}


def tokens_using(name: str, **options: Any) -> dict[str, Any]:
    """The ``IDEMPOTENCY`` setting whose default token backend is ``name`` (a short name of
    :data:`TOKEN_BACKENDS` or a dotted path) with ``options``."""
    return {"TOKENS": {"default": entry(TOKEN_BACKENDS.get(name, name), **options)}}


def locks_using(name: str, **options: Any) -> dict[str, Any]:
    """The ``IDEMPOTENCY`` setting whose default lock backend is ``name`` (a short name of
    :data:`LOCK_BACKENDS` or a dotted path) with ``options``."""
    return {"LOCKS": {"default": entry(LOCK_BACKENDS.get(name, name), **options)}}


def store_of(backend: str, **options: Any) -> Any:
    """A new store of the class ``backend`` names, made with ``options``."""
    return import_string(backend)(**options)


#: every store and mode the HTTP layer runs on; ids are used in test names
STORE_VARIANTS: dict[str, dict[str, Any]] = {
    "db-atomic": {**using(DB_STORE), "MODE": "atomic"},
    "db-lease": {**using(DB_STORE), "MODE": "lease"},
    "db-cached": {**using(DB_STORE, response_cache="default"), "MODE": "atomic"},
    "redis": {**using(REDIS_STORE), "MODE": "lease"},
    "cache": {**using(CACHE_STORE), "MODE": "lease"},
}


def backend_of(variant: dict[str, Any]) -> str:
    """The BACKEND of a variant's default store."""
    return str(variant["STORES"]["default"]["BACKEND"])


def variant_params(*names: str) -> list[Any]:
    """``pytest.param`` of each variant of ``STORE_VARIANTS`` named (all by default), the
    Redis one marked ``redis``."""
    return [
        pytest.param(name, id=name, marks=[pytest.mark.redis] if name == "redis" else [])
        for name in names or STORE_VARIANTS
    ]


def store_params(*names: str) -> list[Any]:
    """``pytest.param`` of a new instance of each store named (``db``, ``redis``,
    ``cache``), as ``store=`` takes it."""
    paths = {"db": DB_STORE, "redis": REDIS_STORE, "cache": CACHE_STORE}
    return [
        pytest.param(
            store_of(paths[name]), id=name, marks=[pytest.mark.redis] if name == "redis" else []
        )
        for name in names
    ]


#: every store idempotent functions and tasks run on
ALL_STORES = store_params("db", "redis", "cache")
