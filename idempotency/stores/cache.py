"""CacheStore: records in any Django cache, claimed with ``cache.add``.

Weaker guarantees than the other stores, by nature of the cache API:

* the claim is atomic only where the backend's ``add`` is (Redis and
  Memcached: yes; LocMemCache: within one process only; the database and
  file caches: not across processes);
* completing and releasing read the record then write it, so a stale owner
  racing the new owner in the same millisecond window can still overwrite it;
* a cache may evict records before their TTL under memory pressure, which
  lets a retry run again.

Use it for tests and single-process development, or where those limits are
acceptable. Prefer :class:`~idempotency.stores.database.DatabaseStore` or
:class:`~idempotency.stores.redis.RedisStore` in production.

Records are JSON bytes read without the cache's serializer (:class:`RawCache`, which the
database store's response cache uses too): a pickle written under a record's key is never
unpickled."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeGuard

from django.core.cache import BaseCache, caches
from django.core.exceptions import ImproperlyConfigured

from idempotency.codecs import seal, unseal
from idempotency.conf import Setting
from idempotency.stores import authentication
from idempotency.stores.base import (
    BaseStore,
    ClaimStatus,
    KeyState,
    StoredResponse,
    new_fence,
    quota_window,
    store_operation,
)
from idempotency.stores.records import record_digest
from idempotency.utils.backends import KEY_PREFIX
from idempotency.utils.outages import outage_raises_unavailable, unreadable_record

if TYPE_CHECKING:
    from django.core.cache.backends.redis import RedisCache


# Bytes in a Django cache, never unpickled: what ``CacheStore`` and the response cache
# keep their records in, and ``CacheStore``'s record-cap counters.
#
# Django's cache API pickles what it stores and unpickles what it reads (django-redis by
# default, Django's own ``RedisCache``, Memcached, the file and database caches): a
# pickle written under a record's key by anyone who can write to that cache would run
# in this process on the next read. So records are written as bytes the library
# encodes itself (JSON), and read back without the cache's serializer:
#
# * on Redis (``django_redis.cache.RedisCache`` or Django's
#   ``django.core.cache.backends.redis.RedisCache``), straight through the cache's own
#   Redis client, under the name the cache itself would give the key;
# * on ``LocMemCache`` (one process: only this process ever wrote what it reads) and
#   ``DummyCache`` (reads nothing), through the cache API;
# * a counter (``MAX_NEW_RECORDS``) is counted by Redis itself (``SET NX PX`` and
#   ``INCR`` in one ``MULTI``): never the cache API's ``incr``, which on django-redis reads
#   (and unpickles) a value that is not an integer;
# * any other backend is refused (:class:`~django.core.exceptions.ImproperlyConfigured`,
#   and the system check ``idempotency.E020`` before the first request).


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


class CacheStore(BaseStore):
    """Records in a Django cache (its ``cache`` option), claimed with ``cache.add``: lease mode.

    Weaker than the other stores: ``add`` is atomic only where the backend's is (Redis,
    Memcached; LocMemCache within one process, system check W001), completing reads
    then writes, and a cache may evict a record early. For tests and single-process
    development; ``"OPTIONS": {"cache": "records"}`` picks another cache.
    """

    #: ``OPTIONS`` of a cache store (:mod:`idempotency.utils.backends`).
    options: ClassVar[Mapping[str, Setting]] = {
        "cache": Setting("default", "Cache alias whose backend keeps the records.", "cache"),
        "key_prefix": KEY_PREFIX,
    }

    def __init__(self, *, cache: str = "default", key_prefix: str = KEY_PREFIX.default) -> None:
        #: The cache this store keeps records in.
        self.alias = cache
        self.key_prefix = key_prefix

    @property
    def cache(self) -> BaseCache:
        return caches[self.alias]

    @property
    def raw(self) -> RawCache:
        """The cache, read and written as bytes that are never unpickled."""
        return RawCache(self.cache, self.alias)

    def _get(self, name: str) -> dict[str, Any] | None:
        value = self.raw.get(name)
        return None if value is None else load_record(value)

    def _set(self, name: str, record: dict[str, Any], timeout: float) -> None:
        self.raw.set(name, dump_record(record), timeout)

    def record_key(self, scope: str, key: str) -> str:
        return f"{self.key_prefix}:rec:{record_digest(scope, key)}"

    def _as_claim(
        self, record: dict[str, Any], scope: str, key: str, fingerprint: str
    ) -> KeyState | None:
        """The state of ``record``; None when it is completed and its authenticated
        expiry has passed (a completed record is authenticated before anything is
        answered from it: :mod:`~idempotency.stores.authentication`)."""
        if record["state"] == "completed":
            kept = StoredResponse.from_parts(record["status"], record["headers"], record["body"])
            expires = authentication.verify(
                "CacheStore", scope, key, tag=record.get("mac"), fingerprint=str(record["fp"]),
                fence=record.get("fence"), stored=kept,
            )  # fmt: skip
            if min(expires, float(record["expires"])) <= time.time():
                return None
            if record["fp"] != fingerprint:
                return KeyState(ClaimStatus.MISMATCH, fingerprint=str(record["fp"]))
            return KeyState(
                ClaimStatus.COMPLETED,
                response=kept._replace(body=unseal(kept.body)),
                expires_at=min(expires, float(record["expires"])),
            )
        if record["fp"] != fingerprint:
            return KeyState(ClaimStatus.MISMATCH, fingerprint=str(record["fp"]))
        return KeyState(
            ClaimStatus.IN_PROGRESS,
            retry_after=max(0.0, record["lease"] - time.time()),
            recovery_point=record.get("rp", ""),
            recovery_data=record.get("rd"),
        )

    @store_operation("cache")
    def claim(
        self,
        scope: str,
        key: str,
        *,
        fingerprint: str,
        lease: float,
        ttl: float,
        method: str = "",
        route: str = "",
    ) -> KeyState:
        name = self.record_key(scope, key)
        for _attempt in range(5):
            fence = new_fence()
            now = time.time()
            record = {
                "fp": fingerprint,
                "state": "in_progress",
                "fence": fence,
                "lease": now + lease,
                "expires": now + ttl,
                "method": method,
                "route": route,
                "rp": "",
                "rd": None,
            }
            if self.raw.add(name, dump_record(record), ttl):
                return KeyState(ClaimStatus.CLAIMED, fence=fence)
            existing = self._get(name)
            claim = None if existing is None else self._as_claim(existing, scope, key, fingerprint)
            if existing is None or claim is None:
                continue  # released, evicted or expired meanwhile: try again
            if claim.status is not ClaimStatus.IN_PROGRESS or existing["lease"] > now:
                return claim
            # the lease is over: one taker wins the marker for this owner's fence
            marker = f"{name}:takeover:{existing['fence']}"
            if not self.raw.add(marker, b"1", max(1, int(lease))):
                return claim
            taken = {**existing, "fence": fence, "lease": now + lease}
            self._set(name, taken, max(1, int(existing["expires"] - now)))
            return KeyState(
                ClaimStatus.CLAIMED,
                fence=fence,
                recovery_point=existing.get("rp", ""),
                recovery_data=existing.get("rd"),
                taken_over=True,
            )
        return KeyState(ClaimStatus.IN_PROGRESS, retry_after=1.0)

    @store_operation("cache")
    def lookup(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        record = self._get(self.record_key(scope, key))
        return None if record is None else self._as_claim(record, scope, key, fingerprint)

    def _owned(self, scope: str, key: str, fence: int) -> dict[str, Any] | None:
        record = self._get(self.record_key(scope, key))
        if record is None or record["state"] != "in_progress" or record["fence"] != fence:
            return None
        return record

    @store_operation("cache")
    def complete(
        self,
        scope: str,
        key: str,
        *,
        fence: int,
        response: StoredResponse,
        ttl: float,
        fingerprint: str = "",
    ) -> bool:
        record = self._owned(scope, key, fence)
        if record is None:
            return False
        stored = response._replace(body=seal(response.body))
        record.update(
            state="completed",
            status=stored.status,
            headers=stored.headers,
            body=stored.body,
            expires=time.time() + ttl,
            mac=authentication.sign(
                scope, key, fingerprint=fingerprint or str(record["fp"]), fence=fence,
                stored=stored, ttl=ttl,
            ),
        )  # fmt: skip
        self._set(self.record_key(scope, key), record, ttl)
        return True

    @store_operation("cache")
    def release(self, scope: str, key: str, *, fence: int) -> bool:
        record = self._owned(scope, key, fence)
        if record is None:
            return False
        name = self.record_key(scope, key)
        if record.get("rp"):
            record["lease"] = time.time()
            self._set(name, record, max(1, int(record["expires"] - time.time())))
        else:
            self.raw.delete(name)
        return True

    @store_operation("cache")
    def extend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
        """Read, check, write: like completing, not atomic against a racing takeover."""
        record = self._owned(scope, key, fence)
        if record is None:
            return False
        now = time.time()
        record.update(lease=now + lease, expires=max(record["expires"], now + lease))
        self._set(self.record_key(scope, key), record, max(1, int(record["expires"] - now)))
        return True

    @store_operation("cache")
    def save_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        record = self._owned(scope, key, fence)
        if record is None:
            return False
        record.update(rp=name, rd=data)
        self._set(self.record_key(scope, key), record, max(1, int(record["expires"] - time.time())))
        return True

    @outage_raises_unavailable("cache")
    def count_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        """One more on the (scope, window) counter (:meth:`RawCache.incr
        <idempotency.stores.cache.RawCache.incr>`): Redis' own ``INCR``, never the
        cache API's ``incr``, which on django-redis unpickles a value that is not an
        integer. A foreign value under the counter is
        :class:`~idempotency.exceptions.StoreCorrupted`, and is never loaded."""
        start, left = quota_window(window, time.time())
        name = f"{self.key_prefix}:quota:{record_digest(scope, '')}:{start}"
        try:
            return self.raw.incr(name, max(1, int(left) + 1)), left
        except (ValueError, TypeError) as exc:
            raise unreadable_record(type(self).__name__, scope, "", str(exc)) from exc

    @outage_raises_unavailable("cache")
    def delete(self, scope: str, key: str) -> bool:
        return self.raw.delete(self.record_key(scope, key))


def dump_record(record: dict[str, Any]) -> bytes:
    """A record as the JSON bytes kept in the cache (the body in base64)."""
    body = record.get("body")
    if body is not None:
        record = {**record, "body": base64.b64encode(body).decode()}
    return json.dumps(record, separators=(",", ":")).encode()


def load_record(value: Any) -> dict[str, Any]:
    """The record of :func:`dump_record`'s bytes; ``ValueError`` for anything else (a
    foreign value: :class:`~idempotency.exceptions.StoreCorrupted`)."""
    if not isinstance(value, bytes | bytearray):
        raise ValueError(f"a {type(value).__name__} where a record's bytes should be")
    record = json.loads(value)
    if not isinstance(record, dict) or "fp" not in record or "state" not in record:
        raise ValueError("not a record")
    if record.get("body") is not None:
        record["body"] = base64.b64decode(record["body"])
    return record
