"""RedisStore's native async I/O: ``redis.asyncio`` clients, one per running event loop.

An asyncio connection belongs to the loop that opened it: a client shared by two loops
(``asyncio.run`` twice, a test runner's loop per test, a thread with a loop of its own)
would read one loop's socket from another. :class:`LoopClients` keeps one client per
running loop, in a ``WeakKeyDictionary`` keyed by the loop, so a closed and collected
loop takes its client with it.

Each client is made from the django-redis client the sync side uses, with the same
server, database, credentials, TLS and timeouts (:func:`async_factory`): plain
``redis.Redis`` clients over TCP, TLS or a Unix socket. Anything else (Sentinel pools,
client-side caching, Redis Cluster, another library's client) has no async twin here:
:func:`async_factory` returns None, and the store's ``a*`` methods fall back to the
default, a thread per call (:meth:`~idempotency.stores.base.BaseStore.run_in_thread`).
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import Callable
from typing import Any

#: What a sync connection's arguments may carry over to an asyncio one: plain values
#: only (the sync pool's retry policy, event dispatcher and handlers are sync objects).
_CARRIED = frozenset(
    {
        "host", "port", "path", "db", "username", "password", "credential_provider",
        "socket_timeout", "socket_connect_timeout", "socket_keepalive",
        "socket_keepalive_options", "socket_type", "retry_on_timeout", "encoding",
        "encoding_errors", "decode_responses", "socket_read_size", "health_check_interval",
        "client_name", "protocol", "ssl_keyfile", "ssl_certfile", "ssl_cert_reqs",
        "ssl_ca_certs", "ssl_ca_data", "ssl_check_hostname", "ssl_min_version",
        "ssl_ciphers", "ssl_password",
    }
)  # fmt: skip


def async_factory(client: Any) -> Callable[[], Any] | None:
    """A function that makes a ``redis.asyncio.Redis`` speaking to the server of the sync
    ``client`` as ``client`` does, or None when ``client`` has no such twin."""
    import redis
    from redis import connection as sync
    from redis.asyncio import connection as aio

    if type(client) is not redis.Redis:
        return None
    pool = client.connection_pool
    if type(pool) is not sync.ConnectionPool or getattr(pool, "cache", None) is not None:
        return None  # Sentinel, a blocking pool, client-side caching: left to the thread
    classes: dict[type[Any], type[Any]] = {
        sync.Connection: aio.Connection,
        sync.SSLConnection: aio.SSLConnection,
        sync.UnixDomainSocketConnection: aio.UnixDomainSocketConnection,
    }
    connection_class = classes.get(pool.connection_class)
    if connection_class is None:
        return None
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k in _CARRIED}
    max_connections = pool.max_connections

    def make() -> Any:
        from redis.asyncio import ConnectionPool, Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import ConnectionError

        # as the sync channel does: a command whose connection failed is sent once more on
        # a new one; a second failure (or a timeout) is the outage
        retry = Retry(NoBackoff(), 1, supported_errors=(ConnectionError,))
        async_pool = ConnectionPool(
            connection_class=connection_class,
            max_connections=max_connections,
            retry=retry,
            **kwargs,
        )
        return Redis(connection_pool=async_pool, retry=retry)

    return make


class LoopClients:
    """One client per running event loop, made by ``make`` on the loop's first call."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> Any:
        """The running loop's client (call it on the loop: no lock needed)."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._make()
        return client


_shas: dict[str, str] = {}


def sha_of(source: str) -> str:
    """The SHA1 Redis names ``source`` by (``EVALSHA``), computed here, as redis-py does."""
    sha = _shas.get(source)
    if sha is None:
        sha = _shas[source] = hashlib.sha1(source.encode()).hexdigest()  # noqa: S324 - Redis' name
    return sha


async def run_script(client: Any, source: str, key: str, args: list[Any]) -> Any:
    """``source`` on ``key`` with ``args`` (``EVALSHA``, loaded again after ``NOSCRIPT``: a
    restarted or flushed server)."""
    from redis.exceptions import NoScriptError

    sha = sha_of(source)
    try:
        return await client.execute_command("EVALSHA", sha, 1, key, *args)
    except NoScriptError:
        await client.execute_command("SCRIPT LOAD", source)
        return await client.execute_command("EVALSHA", sha, 1, key, *args)


async def run_script_waiting(
    client: Any, source: str, key: str, args: list[Any], replicas: int, timeout_ms: int
) -> tuple[Any, int]:
    """``source`` then ``WAIT replicas timeout_ms`` on one connection (``WAIT`` counts the
    writes of its own connection): the reply and how many replicas acknowledged."""
    from redis.exceptions import NoScriptError

    sha = sha_of(source)
    for attempt in (1, 2):
        async with client.pipeline(transaction=False) as pipe:
            pipe.execute_command("EVALSHA", sha, 1, key, *args)
            pipe.execute_command("WAIT", replicas, timeout_ms)
            try:
                reply, acknowledged = await pipe.execute()
            except NoScriptError:
                if attempt == 2:
                    raise
                await client.execute_command("SCRIPT LOAD", source)
                continue
        return reply, int(acknowledged)
    raise AssertionError("unreachable")  # pragma: no cover
