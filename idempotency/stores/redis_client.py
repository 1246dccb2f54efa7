"""How a Redis backend (store, tokens, locks) gets its redis-py client: from the URL of
its ``LOCATION``, or from the django-redis cache its ``cache`` option names; and the
``OPTIONS`` every Redis backend shares."""

from __future__ import annotations

from typing import Any

from idempotency.conf import Setting

#: The URL schemes of a Redis ``LOCATION``.
LOCATION_SCHEMES = ("redis", "rediss", "unix")


def redis_connection(alias: str, user: str) -> Any:
    """The django-redis connection of the cache ``alias``; ``ImproperlyConfigured`` naming
    ``user`` when there is no such cache, django-redis is missing or the cache is another
    backend (which would otherwise surface as a bare ``NotImplementedError``)."""
    from django.core.cache import InvalidCacheBackendError
    from django.core.exceptions import ImproperlyConfigured

    try:
        from django_redis import get_redis_connection

        return get_redis_connection(alias)
    except (ImportError, NotImplementedError, InvalidCacheBackendError) as exc:
        raise ImproperlyConfigured(
            f"{user} needs a django-redis cache, but the cache {alias!r} is not one "
            f"({type(exc).__name__}: {exc or 'unsupported backend'}); see idempotency.E007."
        ) from exc


def redis_client(
    location: str | None, cache: str | None, max_connections: int | None, user: str
) -> Any:
    """The redis-py client of a Redis backend: built from the URL ``location`` (with a
    pool of at most ``max_connections``), else the django-redis connection of the cache
    ``cache`` (``"default"`` when None)."""
    if location is not None:
        from redis import Redis

        return Redis.from_url(location, max_connections=max_connections)
    return redis_connection(cache or "default", user)


#: The ``max_connections`` option of the Redis backends.
MAX_CONNECTIONS = Setting(
    None,
    "With LOCATION: the most connections its pool opens. None: redis-py's default.",
    "integer",
    nullable=True,
)

#: The ``cache`` option of the Redis backends: a ``CACHES`` alias whose Redis they use.
REDIS_CACHE = Setting(
    None,
    "Instead of LOCATION: the CACHES alias of a django-redis cache whose connection it "
    'uses. Neither: the cache "default".',
    "cache",
    nullable=True,
)
