"""Stores keep idempotency records; :data:`stores` holds the configured ones by alias.

``IDEMPOTENCY["STORES"]`` configures them as ``CACHES`` configures caches: each alias
names a ``BACKEND`` (a subclass of :class:`~idempotency.stores.base.BaseStore`), maybe a
``LOCATION`` and ``OPTIONS`` (:mod:`idempotency.utils.backends`). ``stores["redis"]`` is
the store of the alias ``"redis"``, made once per process and kept until the settings
change; :func:`get_store` takes an alias or a store instance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from idempotency.utils.backends import BackendHandler

if TYPE_CHECKING:
    from idempotency.stores.base import BaseStore
    from idempotency.stores.cache import CacheStore
    from idempotency.stores.database import DatabaseStore, database_store
    from idempotency.stores.redis import RedisStore

__all__ = [
    "configured_database",
    "database_aliases",
    "database_store",
    "get_store",
    "stores",
    "DatabaseStore",
    "RedisStore",
    "CacheStore",
]


def _base_store() -> type[BaseStore]:
    from idempotency.stores.base import BaseStore

    return BaseStore


#: The configured stores by alias (``IDEMPOTENCY["STORES"]``), as ``django.core.cache.caches``:
#: ``stores["redis"]``, ``stores.all()``.
stores: BackendHandler[BaseStore] = BackendHandler("STORES", "store", _base_store)


def get_store(store: str | BaseStore | None = None) -> BaseStore:
    """The store ``store`` names: an alias of ``IDEMPOTENCY["STORES"]``, a store instance
    (returned as it is) or None (the ``"default"`` alias).

    Raises:
        django.core.exceptions.ImproperlyConfigured: No such alias, or its entry cannot
            be used (the system checks report the same at startup).
        TypeError: ``store`` is neither an alias nor a store.
    """
    return stores.get(store)


def database_aliases() -> list[str]:
    """The aliases of ``STORES`` whose store keeps its records in a Django database (an
    :class:`~idempotency.stores.base.AtomicStore`: the database store), ``"default"`` first."""
    from idempotency.stores.base import AtomicStore

    aliases = sorted(stores.entries, key=lambda alias: alias != "default")
    found = []
    for alias in aliases:
        cls = stores.backend_class(alias)
        if cls is not None and issubclass(cls, AtomicStore):
            found.append(alias)
    return found


def configured_database() -> str:
    """The database of the first configured database store (``"default"`` first), else
    ``"default"``: where the purge, the metrics and the scope renaming look by default."""
    from idempotency.stores.base import AtomicStore

    for alias in database_aliases():
        store = stores[alias]
        if isinstance(store, AtomicStore):
            return store.using
    return "default"


def __getattr__(name: str) -> Any:
    # lazy: importing idempotency.stores must not import models
    modules = {
        "DatabaseStore": "idempotency.stores.database",
        "RedisStore": "idempotency.stores.redis",
        "CacheStore": "idempotency.stores.cache",
        "database_store": "idempotency.stores.database",
    }
    if name in modules:
        from importlib import import_module

        return getattr(import_module(modules[name]), name)
    raise AttributeError(name)
