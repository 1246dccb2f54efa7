"""How :class:`~idempotency.stores.RedisStore` talks to Redis: the django-redis client,
its async twin per event loop, scripts run on the store's own connections, and
``WAIT`` for replicas after a write (``wait_replicas``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from idempotency.conf import Setting
from idempotency.core.backends import KEY_PREFIX
from idempotency.stores import record_digest
from idempotency.stores.base import BaseStore
from idempotency.stores.records import now_ms, quota_window
from idempotency.stores.redis_async import (
    AsyncChannel,
    LoopChannels,
    async_twin,
    run_script,
    run_script_waiting,
)
from idempotency.stores.redis_channel import Channel, channel_for
from idempotency.stores.redis_client import (
    LOCATION_SCHEMES,
    MAX_CONNECTIONS,
    REDIS_CACHE,
    redis_client,
)


class RedisConnection(BaseStore):
    """The connections, scripts and replica waits of a Redis store."""

    #: The URL schemes of a Redis ``LOCATION``.
    location_schemes: ClassVar[tuple[str, ...]] = LOCATION_SCHEMES
    #: ``OPTIONS`` of a Redis store (:mod:`idempotency.core.backends`).
    options: ClassVar[Mapping[str, Setting]] = {
        "cache": REDIS_CACHE,
        "max_connections": MAX_CONNECTIONS,
        "wait_replicas": Setting(
            0,
            "Replicas that must acknowledge each claim, completion and recovery point "
            "(WAIT numreplicas timeout) before it counts; 0 waits for none.",
            "integer",
            inclusive=True,
        ),
        "wait_timeout": Setting(
            0.5,
            "Seconds WAIT may block for those replicas; a claim not replicated in time is "
            "released and answered with 503.",
            "seconds",
        ),
        "key_prefix": KEY_PREFIX,
    }

    def __init__(
        self,
        location: str | None = None,
        *,
        cache: str | None = None,
        max_connections: int | None = None,
        wait_replicas: int = 0,
        wait_timeout: float = 0.5,
        key_prefix: str = KEY_PREFIX.default,
    ) -> None:
        self.location = location
        self.cache = cache
        self.max_connections = max_connections
        self.wait_replicas = wait_replicas
        self.wait_timeout = wait_timeout
        self.key_prefix = key_prefix
        self._client: Any = None
        self._channel: Channel | None = None
        self._scripts: dict[str, Any] = {}
        #: the async channels (one per running loop); None where the client has no async
        #: twin (the a* methods then run the sync ones in threads); unset until first use
        self._loop_channels: LoopChannels | None = None
        self._async_known = False

    @property
    def alias(self) -> str | None:
        """The django-redis cache whose connection this store uses (``cache``, else
        ``"default"``), or None when it connects to its ``location``."""
        return None if self.location is not None else self.cache or "default"

    @property
    def client(self) -> Any:
        if self._client is None:
            client = redis_client(self.location, self.cache, self.max_connections, "RedisStore")
            self._channel = channel_for(client)
            self._client = client
        return self._client

    def async_channel(self) -> AsyncChannel | None:
        """The running event loop's channel of ``redis.asyncio`` connections (made on its
        first call there, never shared with another loop:
        :mod:`~idempotency.stores.redis_async`), or None where the django-redis client has
        no async twin (Redis Cluster, Sentinel): the ``a*`` methods then run the sync ones
        in threads."""
        if not self._async_known:
            twin = async_twin(self.client)
            if twin is not None:
                connection_class, kwargs = twin
                self._loop_channels = LoopChannels(lambda: AsyncChannel(connection_class, kwargs))
            self._async_known = True
        return self._loop_channels.get() if self._loop_channels is not None else None

    async def _arun(
        self, channel: AsyncChannel, source: str, key: str, args: list[Any]
    ) -> tuple[Any, int | None]:
        """:meth:`_run` on the async ``channel``."""
        if self.wait_replicas <= 0:
            return await run_script(channel, source, key, args), None
        timeout_ms = max(1, int(self.wait_timeout * 1000))
        return await run_script_waiting(channel, source, key, args, self.wait_replicas, timeout_ms)

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
        return f"{self.key_prefix}:{{{record_digest(scope, key)}}}:rec"

    def _quota_counter(self, scope: str, window: float) -> tuple[str, float]:
        """The counter of ``scope``'s current window and the seconds left of the window."""
        start, left = quota_window(window, now_ms() / 1000)
        name = f"{self.key_prefix}:{{{record_digest(scope, '')}}}:quota:{start}"
        return name, left
