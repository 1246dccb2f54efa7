"""RedisStore: records as Redis hashes, every transition one Lua script.

Uses the connection of a django-redis cache (``REDIS_ALIAS``). A record lives
under ``<prefix>:{<digest>}:rec``; the digest sits in a hash tag so the record
and anything kept beside it land on one Redis Cluster slot. Expiry is Redis's
own key TTL, so an expired record is absent the moment its TTL passes. The scripts
judge leases by the Redis server's clock (``TIME``); only the ``Retry-After`` estimate
of :meth:`RedisStore.lookup` reads the application's clock.

Replication is asynchronous: a primary that acknowledged a claim and died before its
replicas received it loses the claim at failover, and a retry may then run the work
a second time. With ``wait_replicas`` (setting ``REDIS_WAIT_REPLICAS``) every claim,
completion and recovery point is followed by ``WAIT numreplicas timeout`` on the same
connection: the view runs only once the claim is on that many replicas, and a claim
that could not be replicated in time is released again and answered with 503
(:class:`~idempotency.exceptions.StoreNotDurable`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, ClassVar

from idempotency.codecs import seal, unseal
from idempotency.conf import idempotency_settings
from idempotency.core.keyed_hashes import log_ref
from idempotency.core.outages import outage_raises_unavailable
from idempotency.exceptions import StoreNotDurable
from idempotency.stores import record_digest
from idempotency.stores.base import (
    BaseStore,
    Claim,
    ClaimStatus,
    StoredResponse,
    new_fence,
    now_ms,
    quota_window,
    store_operation,
)
from idempotency.stores.redis_async import (
    LoopClients,
    async_factory,
    run_script,
    run_script_waiting,
)
from idempotency.stores.redis_channel import Channel, channel_for
from idempotency.stores.redis_scripts import (
    CLAIM,
    COMPLETE,
    COUNT_NEW_RECORD,
    EXTEND,
    RELEASE,
    SAVE_RECOVERY_POINT,
)

#: What a lookup reads of a record, in this order.
_LOOKUP_FIELDS = ("state", "fp", "lease", "status", "headers", "body", "rp", "rd")

logger = logging.getLogger("idempotency.stores.redis")


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


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _expires(ttl_ms: int) -> float | None:
    """When a record with ``ttl_ms`` left expires, on this process' clock (``PTTL``'s
    -1, no expiry, is None)."""
    return now_ms() / 1000 + ttl_ms / 1000 if ttl_ms > 0 else None


def _data(value: Any) -> Any:
    text = _text(value)
    return json.loads(text) if text else None


class RedisStore(BaseStore):
    """Records in Redis, through a django-redis cache's connection (lease mode only).

    Needs ``django-redis`` (the ``redis`` extra) and a ``CACHES`` entry whose
    ``BACKEND`` is ``django_redis.cache.RedisCache``; the store opens connections of
    its own with that cache's connection settings, on first use, one per command in
    flight (:mod:`~idempotency.stores.redis_channel`). Claim, completion, release and
    recovery points are one Lua script each, judged by the Redis server's clock; keys
    expire with the record's TTL and carry a hash tag, so Redis Cluster works
    (``idempotency.redis_cluster.ClusterConnectionFactory``).
    Turn on AOF persistence: a Redis that forgets its records lets completed keys run
    again (system check W007).

    Args:
        alias: The django-redis cache alias (default ``REDIS_ALIAS``).
        wait_replicas: Replicas that must acknowledge each claim, completion and
            recovery point (``WAIT``) before it counts (default ``REDIS_WAIT_REPLICAS``).
        wait_timeout: Longest ``WAIT`` for them in seconds (default
            ``REDIS_WAIT_TIMEOUT``); a claim not replicated in time is released and
            answered ``503 idempotency-store-not-durable``.
    """

    supports_atomic: ClassVar[bool] = False

    def __init__(
        self,
        alias: str | None = None,
        *,
        wait_replicas: int | None = None,
        wait_timeout: float | None = None,
    ) -> None:
        self._alias = alias
        self._wait_replicas = wait_replicas
        self._wait_timeout = wait_timeout
        self._client: Any = None
        self._channel: Channel | None = None
        self._scripts: dict[str, Any] = {}
        #: the async clients (one per running loop); None where the client has no async
        #: twin (the a* methods then run the sync ones in threads); unset until first use
        self._loop_clients: LoopClients | None = None
        self._async_known = False

    @property
    def wait_replicas(self) -> int:
        value = self._wait_replicas
        return int(idempotency_settings.REDIS_WAIT_REPLICAS if value is None else value)

    @property
    def wait_timeout(self) -> float:
        value = self._wait_timeout
        return float(idempotency_settings.REDIS_WAIT_TIMEOUT if value is None else value)

    @property
    def alias(self) -> str:
        """The django-redis cache whose connection this store uses (default ``REDIS_ALIAS``)."""
        return str(self._alias or idempotency_settings.REDIS_ALIAS)

    @property
    def client(self) -> Any:
        if self._client is None:
            client = redis_connection(self.alias, "RedisStore")
            self._channel = channel_for(client)
            self._client = client
        return self._client

    def async_client(self) -> Any | None:
        """The ``redis.asyncio`` client of the running event loop (made on its first call
        there, never shared with another loop: :mod:`~idempotency.stores.redis_async`),
        or None where the django-redis client has no async twin (Redis Cluster,
        Sentinel): the ``a*`` methods then run the sync ones in threads."""
        if not self._async_known:
            factory = async_factory(self.client)
            self._loop_clients = LoopClients(factory) if factory is not None else None
            self._async_known = True
        return self._loop_clients.get() if self._loop_clients is not None else None

    async def _arun(
        self, client: Any, source: str, key: str, args: list[Any]
    ) -> tuple[Any, int | None]:
        """:meth:`_run` on the async ``client``."""
        if self.wait_replicas <= 0:
            return await run_script(client, source, key, args), None
        timeout_ms = max(1, int(self.wait_timeout * 1000))
        return await run_script_waiting(client, source, key, args, self.wait_replicas, timeout_ms)

    def _command(self, *args: Any) -> Any:
        """One command: on one of the store's own connections where the client allows it
        (:mod:`~idempotency.stores.redis_channel`), else through the client."""
        client = self.client
        if self._channel is not None:
            return self._channel.execute(*args)
        return client.execute_command(*args)

    def _eval(self, name: str, source: str, key: str, args: list[Any]) -> Any:
        """Script ``name`` on ``key``, as :meth:`_command` sends a command."""
        script = self._script(name, source)
        if self._channel is not None:
            return self._channel.run_script(script, [key], args)
        return script(keys=[key], args=args)

    def _script(self, name: str, source: str) -> Any:
        script = self._scripts.get(name)
        if script is None:
            script = self.client.register_script(source)
            self._scripts[name] = script
        return script

    def _run(self, name: str, source: str, key: str, args: list[Any]) -> tuple[Any, int | None]:
        """Run script ``name`` on ``key``; with ``wait_replicas``, then ``WAIT`` on the same
        connection. The reply, and how many replicas acknowledged (None without WAIT)."""
        if self.wait_replicas <= 0:
            return self._eval(name, source, key, args), None
        script = self._script(name, source)
        client = self.client
        if not hasattr(client, "get_node_from_key"):
            return self._run_waiting(client, script, key, args)
        # RedisCluster: straight to the primary of key's slot (a cluster pipeline cannot
        # run scripts); after a failover or resharding, learn the new topology and retry
        # once. A retried claim that did reach the old primary finds its own record and
        # answers "in progress": never a second owner.
        from redis.exceptions import RedisError

        try:
            node = client.get_redis_connection(client.get_node_from_key(key))
            return self._run_waiting(node, script, key, args)
        except RedisError:
            client.nodes_manager.initialize()
            node = client.get_redis_connection(client.get_node_from_key(key))
            return self._run_waiting(node, script, key, args)

    def _run_waiting(
        self, client: Any, script: Any, key: str, args: list[Any]
    ) -> tuple[Any, int | None]:
        # WAIT counts the writes of its own connection: one pipeline, one connection
        with client.pipeline(transaction=False) as pipe:
            script(keys=[key], args=args, client=pipe)
            pipe.execute_command("WAIT", self.wait_replicas, max(1, int(self.wait_timeout * 1000)))
            reply, acknowledged = pipe.execute()
        return reply, int(acknowledged)

    def _durable(self, acknowledged: int | None) -> bool:
        return acknowledged is None or acknowledged >= self.wait_replicas

    def record_key(self, scope: str, key: str) -> str:
        return f"{idempotency_settings.KEY_PREFIX}:{{{record_digest(scope, key)}}}:rec"

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
    ) -> Claim:
        fence = new_fence()
        args = _claim_args(fingerprint, fence, lease, ttl, method, route)
        reply, acknowledged = self._run("claim", CLAIM, self.record_key(scope, key), args)
        claim = self._claim_from_reply(reply, fence)
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
    ) -> Claim:
        client = self.async_client()
        if client is None:
            return await super().aclaim(
                scope, key, fingerprint=fingerprint, lease=lease, ttl=ttl, method=method,
                route=route,
            )  # fmt: skip
        fence = new_fence()
        args = _claim_args(fingerprint, fence, lease, ttl, method, route)
        reply, acknowledged = await self._arun(client, CLAIM, self.record_key(scope, key), args)
        claim = self._claim_from_reply(reply, fence)
        if claim.owned and not self._durable(acknowledged):
            await self.arelease(scope, key, fence=fence)
            raise StoreNotDurable(replicas=self.wait_replicas, acknowledged=acknowledged)
        return claim

    def _claim_from_reply(self, reply: list[Any], fence: int) -> Claim:
        status = _text(reply[0])
        if status == "claimed":
            return Claim(
                ClaimStatus.CLAIMED,
                fence=fence,
                recovery_point=_text(reply[1]),
                recovery_data=_data(reply[2]),
                taken_over=len(reply) > 3,
            )
        if status == "completed":
            return Claim(
                ClaimStatus.COMPLETED,
                response=StoredResponse.from_parts(
                    int(reply[1]), _text(reply[2]), unseal(reply[3])
                ),
                expires_at=_expires(int(reply[4])),
            )
        if status == "in_progress":
            return Claim(
                ClaimStatus.IN_PROGRESS,
                retry_after=int(reply[1]) / 1000,
                recovery_point=_text(reply[2]),
                recovery_data=_data(reply[3]),
            )
        return Claim(ClaimStatus.MISMATCH, fingerprint=_text(reply[1]) if len(reply) > 1 else "")

    @store_operation("redis")
    def lookup(self, scope: str, key: str, *, fingerprint: str) -> Claim | None:
        record = self.record_key(scope, key)
        fields = self._command("HMGET", record, *_LOOKUP_FIELDS)
        return _claim_from_fields(fields, fingerprint, lambda: self._command("PTTL", record))

    @store_operation("redis")
    async def alookup(self, scope: str, key: str, *, fingerprint: str) -> Claim | None:
        client = self.async_client()
        if client is None:
            return await super().alookup(scope, key, fingerprint=fingerprint)
        record = self.record_key(scope, key)
        # one round trip: the TTL too (read only for a completed record)
        async with client.pipeline(transaction=False) as pipe:
            pipe.execute_command("HMGET", record, *_LOOKUP_FIELDS)
            pipe.execute_command("PTTL", record)
            fields, remaining = await pipe.execute()
        return _claim_from_fields(fields, fingerprint, lambda: remaining)

    async def apeek(self, scope: str, key: str, *, fingerprint: str) -> Claim | None:
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
        args = _complete_args(fence, response, ttl)
        done, acknowledged = self._run("complete", COMPLETE, self.record_key(scope, key), args)
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
        client = self.async_client()
        if client is None:
            return await super().acomplete(
                scope, key, fence=fence, response=response, ttl=ttl, fingerprint=fingerprint
            )
        args = _complete_args(fence, response, ttl)
        record = self.record_key(scope, key)
        done, acknowledged = await self._arun(client, COMPLETE, record, args)
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
        client = self.async_client()
        if client is None:
            return await super().arelease(scope, key, fence=fence)
        return bool(await run_script(client, RELEASE, self.record_key(scope, key), [fence]))

    @store_operation("redis")
    def extend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
        return bool(
            self._eval(
                "extend", EXTEND, self.record_key(scope, key), [fence, max(1, int(lease * 1000))]
            )
        )

    @store_operation("redis")
    async def aextend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
        client = self.async_client()
        if client is None:
            return await super().aextend(scope, key, fence=fence, lease=lease)
        args = [fence, max(1, int(lease * 1000))]
        return bool(await run_script(client, EXTEND, self.record_key(scope, key), args))

    @store_operation("redis")
    def save_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        args = _recovery_args(fence, name, data)
        record = self.record_key(scope, key)
        saved, acknowledged = self._run("recovery", SAVE_RECOVERY_POINT, record, args)
        return self._saved(saved, acknowledged)

    @store_operation("redis")
    async def asave_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        client = self.async_client()
        if client is None:
            return await super().asave_recovery_point(scope, key, fence=fence, name=name, data=data)
        args = _recovery_args(fence, name, data)
        record = self.record_key(scope, key)
        saved, acknowledged = await self._arun(client, SAVE_RECOVERY_POINT, record, args)
        return self._saved(saved, acknowledged)

    def _saved(self, saved: Any, acknowledged: int | None) -> bool:
        if saved and not self._durable(acknowledged):
            raise StoreNotDurable(replicas=self.wait_replicas, acknowledged=acknowledged)
        return bool(saved)

    def _quota_counter(self, scope: str, window: float) -> tuple[str, float]:
        """The counter of ``scope``'s current window and the seconds left of the window."""
        start, left = quota_window(window, now_ms() / 1000)
        name = f"{idempotency_settings.KEY_PREFIX}:{{{record_digest(scope, '')}}}:quota:{start}"
        return name, left

    @outage_raises_unavailable("redis")
    def count_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        """``INCR`` of the (scope, window) counter and its expiry, in one script."""
        name, left = self._quota_counter(scope, window)
        count = self._eval("quota", COUNT_NEW_RECORD, name, [max(1, int(left * 1000))])
        return int(count), left

    @outage_raises_unavailable("redis")
    async def acount_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        client = self.async_client()
        if client is None:
            return await super().acount_new_record(scope, window=window)
        name, left = self._quota_counter(scope, window)
        count = await run_script(client, COUNT_NEW_RECORD, name, [max(1, int(left * 1000))])
        return int(count), left

    @outage_raises_unavailable("redis")
    def delete(self, scope: str, key: str) -> bool:
        return bool(self.client.delete(self.record_key(scope, key)))

    @outage_raises_unavailable("redis")
    async def adelete(self, scope: str, key: str) -> bool:
        client = self.async_client()
        if client is None:
            return await super().adelete(scope, key)
        return bool(await client.delete(self.record_key(scope, key)))


def _claim_args(
    fingerprint: str, fence: int, lease: float, ttl: float, method: str, route: str
) -> list[Any]:
    return [fingerprint, fence, int(lease * 1000), max(1, int(ttl * 1000)), method, route]


def _complete_args(fence: int, response: StoredResponse, ttl: float) -> list[Any]:
    return [
        fence,
        response.status,
        response.headers_json(),
        seal(response.body),
        max(1, int(ttl * 1000)),
    ]


def _recovery_args(fence: int, name: str, data: Any) -> list[Any]:
    return [fence, name, json.dumps(data) if data is not None else ""]


def _claim_from_fields(
    fields: list[Any], fingerprint: str, remaining: Callable[[], Any]
) -> Claim | None:
    """The :class:`Claim` of a record's ``HMGET`` of ``_LOOKUP_FIELDS`` (None: absent);
    ``remaining`` gives its ``PTTL``, read only for a completed record."""
    state, fp, lease, status, headers, body, point, data = fields
    if state is None:
        return None
    if _text(fp) != fingerprint:
        return Claim(ClaimStatus.MISMATCH, fingerprint=_text(fp))
    if _text(state) == "c":
        return Claim(
            ClaimStatus.COMPLETED,
            response=StoredResponse.from_parts(int(status), _text(headers), unseal(body)),
            expires_at=_expires(int(remaining())),
        )
    left = (int(lease or 0) - now_ms()) / 1000
    return Claim(
        ClaimStatus.IN_PROGRESS,
        retry_after=max(0.0, left),
        recovery_point=_text(point),
        recovery_data=_data(data),
    )
