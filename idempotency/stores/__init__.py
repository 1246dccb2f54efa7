"""Stores keep idempotency records; :func:`get_store` returns the configured one.

Stores are resolved from dotted paths and kept per path until settings change.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import import_string

from idempotency.conf import idempotency_settings, on_reload

if TYPE_CHECKING:
    from idempotency.stores.base import BaseStore
    from idempotency.stores.cache import CacheStore
    from idempotency.stores.database import DatabaseStore
    from idempotency.stores.redis import RedisStore

__all__ = ["get_store", "record_digest", "DatabaseStore", "RedisStore", "CacheStore"]

_stores: dict[str, BaseStore] = {}


def get_store(store: str | type[BaseStore] | BaseStore | None = None) -> BaseStore:
    """The store named by ``store`` (a dotted path, class or instance), or the default.

    An instance is returned as it is. A class or dotted path (``STORE`` without an
    argument) is instantiated with no arguments once, and that instance is reused until
    the settings change.
    """
    from idempotency.stores.base import BaseStore

    if isinstance(store, BaseStore):
        return store
    if store is None:
        store = idempotency_settings.STORE
    if isinstance(store, BaseStore):  # an instance given in settings
        return store
    path = f"{store.__module__}.{store.__qualname__}" if isinstance(store, type) else str(store)
    try:
        return _stores[path]
    except KeyError:
        pass
    cls = store if isinstance(store, type) else import_string(path)
    instance: BaseStore = cls()
    _stores[path] = instance
    return instance


@on_reload
def _reset() -> None:
    _stores.clear()


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
