"""Bytes in a Django cache, never unpickled: what
:class:`~idempotency.stores.cache.CacheStore` and the database store's response cache keep
their records in, and ``CacheStore``'s record-cap counters.

Django's cache API pickles what it stores and unpickles what it reads (django-redis by
default, Django's own ``RedisCache``, Memcached, the file and database caches): a
pickle written under a record's key by anyone who can write to that cache would run
in this process on the next read. So records are written as bytes the library
encodes itself (JSON), and read back without the cache's serializer:

* on Redis (``django_redis.cache.RedisCache`` or Django's
  ``django.core.cache.backends.redis.RedisCache``), straight through the cache's own
  Redis client, under the name the cache itself would give the key;
* on ``LocMemCache`` (one process: only this process ever wrote what it reads) and
  ``DummyCache`` (reads nothing), through the cache API;
* a counter (``MAX_NEW_RECORDS``) is counted by Redis itself (``SET NX PX`` and
  ``INCR`` in one ``MULTI``): never the cache API's ``incr``, which on django-redis reads
  (and unpickles) a value that is not an integer;
* any other backend is refused (:class:`~django.core.exceptions.ImproperlyConfigured`,
  and the system check ``idempotency.E020`` before the first request).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from django.core.cache import BaseCache
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from django.core.cache.backends.redis import RedisCache


DJANGO_REDIS = "django_redis.cache.RedisCache"
DJANGO_BUILTIN_REDIS = "django.core.cache.backends.redis.RedisCache"
#: Backends read through the cache API: in-process, or storing nothing.
IN_PROCESS = (
    "django.core.cache.backends.locmem.LocMemCache",
    "django.core.cache.backends.dummy.DummyCache",
)


def _classes(cache: BaseCache) -> set[str]:
    return {f"{c.__module__}.{c.__qualname__}" for c in type(cache).__mro__}


def raw_kind(cache: BaseCache) -> str:
    """How ``cache`` is read without unpickling: "django_redis", "redis", "api", or ""
    (it cannot be)."""
    classes = _classes(cache)
    if DJANGO_REDIS in classes:
        return "django_redis"
    if DJANGO_BUILTIN_REDIS in classes:
        return "redis"
    if classes.intersection(IN_PROCESS):
        return "api"
    return ""


class _DjangoRedisCache(Protocol):
    """What django-redis' ``RedisCache`` offers beyond ``BaseCache`` (django-redis ships
    no type hints): its client, which names keys and hands out Redis connections."""

    @property
    def client(self) -> Any: ...


def _django_redis(cache: BaseCache, kind: str) -> TypeGuard[_DjangoRedisCache]:
    """``cache`` is django-redis' ``RedisCache`` (``kind``: :func:`raw_kind` of it)."""
    return kind == "django_redis"


def _builtin_redis(cache: BaseCache, kind: str) -> TypeGuard[RedisCache]:
    """``cache`` is Django's own ``RedisCache`` (``kind``: :func:`raw_kind` of it)."""
    return kind == "redis"


def _millis(timeout: float) -> int:
    return max(1, int(timeout * 1000))


class RawCache:
    """``get``/``set``/``add``/``delete`` of bytes in a Django cache, never unpickled."""

    __slots__ = ("alias", "cache", "kind")

    def __init__(self, cache: BaseCache, alias: str = "") -> None:
        self.cache = cache
        self.alias = alias
        self.kind = raw_kind(cache)

    def _client(self, key: str, *, write: bool) -> tuple[Any, Any]:
        """The Redis client and the key's name in it (the name the cache gives it)."""
        cache = self.cache
        if _django_redis(cache, self.kind):
            client = cache.client
            return client.get_client(write=write), client.make_key(key)
        if _builtin_redis(cache, self.kind):
            name = cache.make_and_validate_key(key)
            return cache._cache.get_client(name, write=write), name
        raise ImproperlyConfigured(
            f"The cache {self.alias or type(self.cache).__name__!r} "
            f"({type(self.cache).__qualname__}) unpickles what it reads: idempotency records "
            "are kept only in a Redis cache or LocMemCache (system check idempotency.E020)."
        )

    def get(self, key: str) -> Any:
        """The bytes under ``key`` (or, through the cache API, whatever is there), or None."""
        if self.kind == "api":
            return self.cache.get(key)
        # the primary's client, as for writes: a replica (a cache of several LOCATIONs
        # reads from one) may lag, and a record read there may be out of date
        client, name = self._client(key, write=True)
        return client.get(name)

    def set(self, key: str, value: bytes, timeout: float) -> None:
        if self.kind == "api":
            self.cache.set(key, value, timeout=timeout)
            return
        client, name = self._client(key, write=True)
        client.set(name, value, px=_millis(timeout))

    def add(self, key: str, value: bytes, timeout: float) -> bool:
        if self.kind == "api":
            return bool(self.cache.add(key, value, timeout=timeout))
        client, name = self._client(key, write=True)
        return bool(client.set(name, value, px=_millis(timeout), nx=True))

    def incr(self, key: str, timeout: float) -> int:
        """One more on the integer counter under ``key`` (made at 0, to live ``timeout``
        seconds, where there is none): its new value. On Redis one ``MULTI`` of ``SET NX
        PX`` and ``INCR``, so Redis counts and nothing is read back. ``ValueError`` when
        ``key`` holds something that is not a counter (a foreign value: never loaded)."""
        if self.kind == "api":  # in process: only this process ever wrote it
            for _attempt in range(3):
                self.cache.add(key, 0, timeout=timeout)
                try:
                    return int(self.cache.incr(key))
                except ValueError:  # expired or evicted between the two: add it again
                    continue
            return 1
        from redis.exceptions import ResponseError

        client, name = self._client(key, write=True)
        pipeline = client.pipeline(transaction=True)
        pipeline.set(name, 0, px=_millis(timeout), nx=True)
        pipeline.incr(name)
        try:
            return int(pipeline.execute()[1])
        except ResponseError as exc:  # "not an integer", WRONGTYPE: not a counter of ours
            raise ValueError(f"not a counter ({exc})") from exc

    def delete(self, key: str) -> bool:
        if self.kind == "api":
            return bool(self.cache.delete(key))
        client, name = self._client(key, write=True)
        return bool(client.delete(name))
