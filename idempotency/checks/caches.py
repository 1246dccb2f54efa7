"""What the checks read about caches: the backend behind an alias, whether a backend is
(a subclass of) another, whether records in it can be read and counted without
unpickling (E020, E050), and the checks of a database store's response cache (E008,
W003)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from idempotency.checks.messages import message

LOCMEM = "django.core.cache.backends.locmem.LocMemCache"
DUMMY = "django.core.cache.backends.dummy.DummyCache"
REDIS_CACHE = "django_redis.cache.RedisCache"
#: django-redis' client that spreads keys over several servers itself: it hands out no
#: one Redis connection (``get_client`` raises), so nothing could be read raw through it.
SHARD_CLIENT = "django_redis.client.ShardClient"


def cache_backend(alias: Any) -> str | None:
    """The BACKEND of the cache ``alias``, or None when there is no such cache."""
    caches: dict[str, Any] = getattr(settings, "CACHES", {}) or {}
    config = caches.get(alias) if isinstance(alias, str) else None
    return str(config.get("BACKEND", "")) if isinstance(config, dict) else None


def backend_is(backend: str | None, path: str) -> bool:
    """Whether the class at the dotted path ``backend`` is (a subclass of) the one at
    ``path``; False when either cannot be imported."""
    if not backend or backend == path:
        return bool(backend)
    try:
        cls, base = import_string(backend), import_string(path)
    except Exception:  # noqa: BLE001 - an unimportable backend is Django's own check
        return False
    return isinstance(cls, type) and isinstance(base, type) and issubclass(cls, base)


def unpickles(backend: str) -> bool:
    """Whether records in a cache of ``backend`` could only be read through its
    unpickling serializer (:mod:`idempotency.stores.raw_cache` reads the others raw)."""
    from idempotency.stores.raw_cache import DJANGO_BUILTIN_REDIS, DJANGO_REDIS, IN_PROCESS

    readable = (DJANGO_REDIS, DJANGO_BUILTIN_REDIS, *IN_PROCESS)
    return not any(backend_is(backend, path) for path in readable)


def unreadable(what: str, alias: str, backend: str) -> checks.CheckMessage | None:
    """E020 or E050 when records and counters in the cache ``alias`` (of ``backend``)
    could only be read through its unpickling serializer; None when they are read raw."""
    if unpickles(backend):
        return message("E020", what=what, alias=alias, backend=backend)
    caches: dict[str, Any] = getattr(settings, "CACHES", {}) or {}
    options = caches[alias].get("OPTIONS") or {}
    client = options.get("CLIENT_CLASS") if isinstance(options, dict) else None
    if isinstance(client, str) and backend_is(client, SHARD_CLIENT):
        return message("E050", what=what, alias=alias, client=client)
    return None


def no_cache(what: str, alias: Any) -> checks.CheckMessage:
    """E008: ``what`` names a cache that is not in CACHES."""
    aliases = ", ".join(sorted(getattr(settings, "CACHES", {}) or {})) or "(none)"
    return message("E008", what=what, alias=alias, aliases=aliases)


def check_response_cache(uses: list[Any]) -> list[checks.CheckMessage]:
    """E008, W003, E020 and E050 for the response cache of each database store in use: a cache
    that exists, is shared and never unpickles what it reads."""
    from idempotency.stores.database import DatabaseStore

    errors = []
    for what, store, instance, _mode in uses:
        cache = instance.response_cache if issubclass(store, DatabaseStore) else None
        alias = cache.alias if cache is not None else None
        if not isinstance(alias, str):
            continue
        where = f"The response cache of {what}"
        backend = cache_backend(alias)
        if backend is None:
            errors.append(no_cache(where, alias))
        elif backend_is(backend, LOCMEM):
            errors.append(message("W003", what=where, alias=alias))
        elif refused := unreadable(where, alias, backend):
            errors.append(refused)
    return errors
