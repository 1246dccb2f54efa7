"""RedisStore: records as Redis hashes, every transition one Lua script.

Connects to its ``LOCATION`` (a ``redis://``, ``rediss://`` or ``unix://`` URL), or uses
the connection of a django-redis cache (its ``cache`` option). A record lives
under ``<prefix>:{<digest>}:rec``; the digest sits in a hash tag so the record
and anything kept beside it land on one Redis Cluster slot. Expiry is Redis's
own key TTL, so an expired record is absent the moment its TTL passes. The scripts
judge leases by the Redis server's clock (``TIME``); only the ``Retry-After`` estimate
of :meth:`RedisStore.lookup` reads the application's clock.

Replication is asynchronous: a primary that acknowledged a claim and died before its
replicas received it loses the claim at failover, and a retry may then run the work
a second time. With the ``wait_replicas`` option every claim,
completion and recovery point is followed by ``WAIT numreplicas timeout`` on the same
connection: the view runs only once the claim is on that many replicas, and a claim
that could not be replicated in time is released again and answered with 503
(:class:`~idempotency.exceptions.StoreNotDurable`).

The connections, scripts and replica waits are in
:mod:`~idempotency.stores.redis_connection`, the records' encoding in
:mod:`~idempotency.stores.redis_records`, the ``redis.asyncio`` connections in
:mod:`~idempotency.stores.redis_async`.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from idempotency.core.keyed_hashes import log_ref
from idempotency.core.outages import outage_raises_unavailable
from idempotency.exceptions import StoreNotDurable
from idempotency.stores.errors import store_operation
from idempotency.stores.records import KeyState, StoredResponse, new_fence
from idempotency.stores.redis_async import run_script
from idempotency.stores.redis_client import redis_connection
from idempotency.stores.redis_connection import RedisConnection
from idempotency.stores.redis_records import (
    LOOKUP_FIELDS,
    as_text,
    claim_args,
    complete_args,
    key_state_from_fields,
    key_state_from_reply,
    recovery_args,
)
from idempotency.stores.redis_scripts import (
    CLAIM,
    COMPLETE,
    COUNT_NEW_RECORD,
    EXTEND,
    RELEASE,
    SAVE_RECOVERY_POINT,
)

__all__ = ["RedisStore", "redis_connection"]

logger = logging.getLogger("idempotency.stores.redis")


class RedisStore(RedisConnection):
    """Records in Redis, at a URL or through a django-redis cache's connection (lease
    mode only).

    Needs redis-py (the ``redis`` extra) and a ``LOCATION``, or django-redis and a
    ``CACHES`` entry whose ``BACKEND`` is ``django_redis.cache.RedisCache`` (its
    ``cache`` option); the store opens connections of its own with that client's
    connection settings, on first use, one per command in
    flight (:mod:`~idempotency.stores.redis_channel`). Claim, completion, release and
    recovery points are one Lua script each, judged by the Redis server's clock; keys
    expire with the record's TTL and carry a hash tag, so Redis Cluster works
    (``idempotency.redis_cluster.ClusterConnectionFactory``).
    Turn on AOF persistence: a Redis that forgets its records lets completed keys run
    again (system check W007).

    Args:
        location: A ``redis://``, ``rediss://`` or ``unix://`` URL to connect to.
        cache: Instead of ``location``, the django-redis cache alias whose connection
            it uses (neither: ``"default"``).
        max_connections: With ``location``, the most connections its pool opens.
        wait_replicas: Replicas that must acknowledge each claim, completion and
            recovery point (``WAIT``) before it counts (default 0).
        wait_timeout: Longest ``WAIT`` for them in seconds (default 0.5); a claim not
            replicated in time is released and answered ``503
            idempotency-store-not-durable``.
        key_prefix: Prefix of its keys (default ``"idem"``).
    """

    supports_atomic: ClassVar[bool] = False

    @store_operation("redis")
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
        fence = new_fence()
        args = claim_args(fingerprint, fence, lease, ttl, method, route)
        reply, acknowledged = self._run("claim", CLAIM, self.record_key(scope, key), args)
        claim = key_state_from_reply(reply, fence, scope, key, fingerprint)
        if claim.owned and not self._durable(acknowledged):
            # not on enough replicas: a failover could lose it, so the work must not start
            self.release(scope, key, fence=fence)
            raise StoreNotDurable(replicas=self.wait_replicas, acknowledged=acknowledged)
        return claim

    @store_operation("redis")
    async def aclaim(
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
        channel = self.async_channel()
        if channel is None:
            return await super().aclaim(
                scope, key, fingerprint=fingerprint, lease=lease, ttl=ttl, method=method,
                route=route,
            )  # fmt: skip
        fence = new_fence()
        args = claim_args(fingerprint, fence, lease, ttl, method, route)
        reply, acknowledged = await self._arun(channel, CLAIM, self.record_key(scope, key), args)
        claim = key_state_from_reply(reply, fence, scope, key, fingerprint)
        if claim.owned and not self._durable(acknowledged):
            await self.arelease(scope, key, fence=fence)
            raise StoreNotDurable(replicas=self.wait_replicas, acknowledged=acknowledged)
        return claim

    @store_operation("redis")
    def lookup(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        record = self.record_key(scope, key)
        fields = self._command("HMGET", record, *LOOKUP_FIELDS)
        return key_state_from_fields(
            fields, scope, key, fingerprint, lambda: self._command("PTTL", record)
        )

    @store_operation("redis")
    async def alookup(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        channel = self.async_channel()
        if channel is None:
            return await super().alookup(scope, key, fingerprint=fingerprint)
        record = self.record_key(scope, key)
        # one round trip: the TTL too (read only for a completed record)
        commands = (("HMGET", record, *LOOKUP_FIELDS), ("PTTL", record))
        fields, remaining = await channel.execute_many(commands)
        return key_state_from_fields(fields, scope, key, fingerprint, lambda: remaining)

    async def apeek(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        return await self.alookup(scope, key, fingerprint=fingerprint)

    @store_operation("redis")
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
        record = self.record_key(scope, key)
        if not fingerprint:  # a caller that did not say: the claim's, which the tag binds
            fingerprint = as_text(self._command("HGET", record, "fp"))
        args = complete_args(scope, key, fingerprint, fence, response, ttl)
        done, acknowledged = self._run("complete", COMPLETE, record, args)
        return self._completed(scope, key, done, acknowledged)

    @store_operation("redis")
    async def acomplete(
        self,
        scope: str,
        key: str,
        *,
        fence: int,
        response: StoredResponse,
        ttl: float,
        fingerprint: str = "",
    ) -> bool:
        channel = self.async_channel()
        if channel is None:
            return await super().acomplete(
                scope, key, fence=fence, response=response, ttl=ttl, fingerprint=fingerprint
            )
        record = self.record_key(scope, key)
        if not fingerprint:  # a caller that did not say: the claim's, which the tag binds
            fingerprint = as_text(await channel.execute("HGET", record, "fp"))
        args = complete_args(scope, key, fingerprint, fence, response, ttl)
        done, acknowledged = await self._arun(channel, COMPLETE, record, args)
        return self._completed(scope, key, done, acknowledged)

    def _completed(self, scope: str, key: str, done: Any, acknowledged: int | None) -> bool:
        if done and not self._durable(acknowledged):
            # the work is done and its answer goes out; only a failover in this window
            # could lose the stored response (the claim, replicated, then blocks retries
            # until its lease ends)
            logger.warning(
                "completion of %s reached %s of %s replicas within %s s",
                log_ref(scope, key),
                acknowledged,
                self.wait_replicas,
                self.wait_timeout,
            )
        return bool(done)

    @store_operation("redis")
    def release(self, scope: str, key: str, *, fence: int) -> bool:
        return bool(self._eval("release", RELEASE, self.record_key(scope, key), [fence]))

    @store_operation("redis")
    async def arelease(self, scope: str, key: str, *, fence: int) -> bool:
        channel = self.async_channel()
        if channel is None:
            return await super().arelease(scope, key, fence=fence)
        return bool(await run_script(channel, RELEASE, self.record_key(scope, key), [fence]))

    @store_operation("redis")
    def extend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
        return bool(
            self._eval(
                "extend", EXTEND, self.record_key(scope, key), [fence, max(1, int(lease * 1000))]
            )
        )

    @store_operation("redis")
    async def aextend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
        channel = self.async_channel()
        if channel is None:
            return await super().aextend(scope, key, fence=fence, lease=lease)
        args = [fence, max(1, int(lease * 1000))]
        return bool(await run_script(channel, EXTEND, self.record_key(scope, key), args))

    @store_operation("redis")
    def save_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        args = recovery_args(fence, name, data)
        record = self.record_key(scope, key)
        saved, acknowledged = self._run("recovery", SAVE_RECOVERY_POINT, record, args)
        return self._saved(saved, acknowledged)

    @store_operation("redis")
    async def asave_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        channel = self.async_channel()
        if channel is None:
            return await super().asave_recovery_point(scope, key, fence=fence, name=name, data=data)
        args = recovery_args(fence, name, data)
        record = self.record_key(scope, key)
        saved, acknowledged = await self._arun(channel, SAVE_RECOVERY_POINT, record, args)
        return self._saved(saved, acknowledged)

    def _saved(self, saved: Any, acknowledged: int | None) -> bool:
        if saved and not self._durable(acknowledged):
            raise StoreNotDurable(replicas=self.wait_replicas, acknowledged=acknowledged)
        return bool(saved)

    @outage_raises_unavailable("redis")
    def count_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        """``INCR`` of the (scope, window) counter and its expiry, in one script."""
        name, left = self._quota_counter(scope, window)
        count = self._eval("quota", COUNT_NEW_RECORD, name, [max(1, int(left * 1000))])
        return int(count), left

    @outage_raises_unavailable("redis")
    async def acount_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        channel = self.async_channel()
        if channel is None:
            return await super().acount_new_record(scope, window=window)
        name, left = self._quota_counter(scope, window)
        count = await run_script(channel, COUNT_NEW_RECORD, name, [max(1, int(left * 1000))])
        return int(count), left

    @outage_raises_unavailable("redis")
    def delete(self, scope: str, key: str) -> bool:
        return bool(self.client.delete(self.record_key(scope, key)))

    @outage_raises_unavailable("redis")
    async def adelete(self, scope: str, key: str) -> bool:
        channel = self.async_channel()
        if channel is None:
            return await super().adelete(scope, key)
        return bool(await channel.execute("DEL", self.record_key(scope, key)))
