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

Records are JSON bytes read without the cache's serializer
(:class:`~idempotency.utils.caches.RawCache`): a pickle written under a record's key is
never unpickled."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from django.core.cache import BaseCache, caches

from idempotency.codecs import seal, unseal
from idempotency.conf import Setting
from idempotency.stores.base import (
    BaseStore,
    ClaimStatus,
    KeyState,
    StoredResponse,
    new_fence,
    quota_window,
    store_operation,
)
from idempotency.stores.records import (
    record_digest,
    sign,
    verify,
)
from idempotency.utils.backends import KEY_PREFIX
from idempotency.utils.caches import RawCache
from idempotency.utils.outages import outage_raises_unavailable, unreadable_record


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
        answered from it: :mod:`~idempotency.stores.records`)."""
        if record["state"] == "completed":
            kept = StoredResponse.from_parts(record["status"], record["headers"], record["body"])
            expires = verify(
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
            mac=sign(
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
        <idempotency.utils.caches.RawCache.incr>`): Redis' own ``INCR``, never the
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
