"""Stores keep idempotency records; :func:`get_store` returns the configured one.

Stores are resolved from dotted paths and kept per path until settings change, as
token and lock backends are (:mod:`idempotency.core.backends`).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from idempotency.core.backends import Pluggable

if TYPE_CHECKING:
    from idempotency.stores.base import BaseStore
    from idempotency.stores.cache import CacheStore
    from idempotency.stores.database import DatabaseStore
    from idempotency.stores.redis import RedisStore

__all__ = ["get_store", "record_digest", "DatabaseStore", "RedisStore", "CacheStore"]


def _base_store() -> type[BaseStore]:
    from idempotency.stores.base import BaseStore

    return BaseStore


#: The stores: ``STORE``, a dotted path to a :class:`~idempotency.stores.base.BaseStore`
#: subclass, or a class or instance.
STORES: Pluggable[BaseStore] = Pluggable("STORE", "store", _base_store)


def get_store(store: str | type[BaseStore] | BaseStore | None = None) -> BaseStore:
    """The store named by ``store`` (a dotted path, class or instance), or the default.

    An instance is returned as it is. A class or dotted path (``STORE`` without an
    argument) is instantiated with no arguments once, and that instance is reused until
    the settings change. A value that names no store class raises
    ``ImproperlyConfigured``.
    """
    return STORES.get(store)


def record_digest(scope: str, key: str) -> str:
    """A short fixed-length name for ``(scope, key)`` in caches and Redis."""
    return hashlib.sha256(f"{scope}\x00{key}".encode()).hexdigest()[:40]


def __getattr__(name: str) -> Any:
    # lazy: importing idempotency.stores must not import models
    modules = {
        "DatabaseStore": "idempotency.stores.database",
        "RedisStore": "idempotency.stores.redis",
        "CacheStore": "idempotency.stores.cache",
    }
    if name in modules:
        from importlib import import_module

        return getattr(import_module(modules[name]), name)
    raise AttributeError(name)
