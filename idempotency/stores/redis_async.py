"""RedisStore's native async I/O: ``redis.asyncio`` connections of the store's own, one
set per running event loop.

As :mod:`~idempotency.stores.redis_channel` does for the sync side, an
:class:`AsyncChannel` keeps idle connections of its own and talks on them directly. A
connection is opened by ``redis.asyncio`` (its handshake: TLS, ``AUTH``, ``SELECT``, the
client's name) and then read by a :class:`~idempotency.stores.redis_wire.Wire`, which
parses replies as they arrive (:class:`Plain`, ``redis.asyncio``'s own
``send_packed_command`` and ``read_response``, where it cannot). The client's command
path (``redis.asyncio.Redis.execute_command``: the pool's checkout under its lock, the
retry wrapper, the argument packer's generator, a write under ``wait_for`` and a read
under a timeout context) cost the event loop more CPU per command than the rest of a
keyed request's Redis work (counted in bench/RESULTS_BREAKDOWN.md).

An asyncio connection belongs to the loop that opened it: a channel shared by two loops
(``asyncio.run`` twice, a test runner's loop per test, a thread with a loop of its own)
would read one loop's socket from another. :class:`LoopChannels` keeps one channel per
running loop, in a ``WeakKeyDictionary`` keyed by the loop, so a closed and collected
loop takes its connections with it.

Each channel's connections are made with the class and arguments of the django-redis
client the sync side uses, mapped to their ``redis.asyncio`` twins (:func:`async_twin`):
the same server, database, credentials, TLS and timeouts, over TCP, TLS or a Unix
socket. Anything else (Sentinel pools, client-side caching, Redis Cluster, another
library's client) has no twin here: :func:`async_twin` returns None, and the store's
``a*`` methods fall back to the default, a thread per call
(:meth:`~idempotency.stores.base.BaseStore.run_in_thread`).

What the client's path does that matters here is done here too: a command whose
connection failed (``ConnectionError``) is sent once more on a new connection, the idle
ones dropped; a connection serves one command (or one batch) at a time; a connection
whose reply was not read to the end (a timeout, a cancelled task) is dropped, never
reused; a script the server does not know (``NOSCRIPT``) is loaded and run again.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from idempotency.stores.redis_channel import hiredis_packer, redis_errors
from idempotency.stores.redis_wire import Wire, can_take_over, disconnect_quietly

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

Command = Sequence[Any]


def async_twin(client: Any) -> tuple[type[Any], dict[str, Any]] | None:
    """The ``redis.asyncio`` connection class and arguments that speak to the server of
    the sync ``client`` as ``client`` does, or None when ``client`` has no such twin."""
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
    return connection_class, kwargs


class AsyncChannel:
    """Commands of one event loop, each on a connection no other task is using.

    Idle connections wait on a plain list: one loop runs one task at a time, and a task
    switches only at an ``await``, so taking one and putting it back needs no lock."""

    def __init__(self, connection_class: type[Any], kwargs: dict[str, Any]) -> None:
        self._connection_class = connection_class
        self._kwargs = kwargs
        self._idle: list[Link] = []
        self._prototype = connection_class(**kwargs)  # packs; never connected
        self._pack = hiredis_packer(self._prototype)

    @property
    def idle(self) -> int:
        """How many connections wait for a command (all of them, between commands)."""
        return len(self._idle)

    async def aclose(self) -> None:
        """Close the idle connections (a loop about to end; a command in flight still
        puts its connection back)."""
        idle, self._idle = self._idle, []
        for link in idle:
            await link.close()

    async def execute(self, *args: Any) -> Any:
        """Send one command and read its reply."""
        replies = await self.execute_many((args,))
        return replies[0]

    async def execute_many(self, commands: Sequence[Command]) -> list[Any]:
        """Send ``commands`` in one write on one connection and read their replies (a
        batch without ``MULTI``: ``WAIT`` after a write counts that connection's writes).
        The first error reply is raised once every reply has been read."""
        packed = self._packed(commands)
        try:
            replies = await self._send(packed, len(commands))
        except redis_errors.ConnectionError:
            # a connection that died while idle (a restarted server, an idle timeout): the
            # others idle beside it most likely died with it; once more, on a new one
            stale, self._idle = self._idle, []
            for link in stale:
                await link.close()
            replies = await self._send(packed, len(commands))
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies

    async def _send(self, packed: bytes, count: int) -> list[Any]:
        try:
            link = self._idle.pop()
        except IndexError:
            link = await self._open()
        try:
            replies = await link.exchange(packed, count)
        except BaseException:
            # whatever is left of these replies on the socket must never be read as the
            # reply to the next command: the connection is dropped
            await link.close()
            raise
        self._idle.append(link)
        return replies

    async def _open(self) -> Link:
        connection = self._connection_class(**self._kwargs)
        await connection.connect()
        return Wire(connection) if can_take_over(connection) else Plain(connection)

    def _packed(self, commands: Sequence[Command]) -> bytes:
        pack = self._pack
        if pack is not None:
            packed: list[bytes] = []
            for command in commands:
                one = pack(tuple(command))
                if one is None:  # an argument only redis-py's packer takes
                    break
                packed.append(one)
            else:
                return packed[0] if len(packed) == 1 else b"".join(packed)
        return b"".join(self._prototype.pack_commands(commands))


class Link(Protocol):
    """A connection of a channel: :class:`~idempotency.stores.redis_wire.Wire`, or
    :class:`Plain` where the wire cannot take the connection over."""

    async def exchange(self, packed: bytes, count: int) -> list[Any]: ...

    async def close(self) -> None: ...


class Plain:
    """A connection read through ``redis.asyncio``'s own read path (RESP3, health
    checks, or a ``redis.asyncio`` unlike the versions :class:`Wire` knows)."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    async def exchange(self, packed: bytes, count: int) -> list[Any]:
        from redis.exceptions import ResponseError

        connection = self.connection
        await connection.send_packed_command(packed)
        replies: list[Any] = []
        for _ in range(count):
            try:
                replies.append(await connection.read_response())
            except ResponseError as exc:  # a whole reply was read: go on with the next
                replies.append(exc)
        return replies

    async def close(self) -> None:
        """Close the connection, not waiting for the server."""
        await disconnect_quietly(self.connection)


class LoopChannels:
    """One :class:`AsyncChannel` per running event loop, made on the loop's first call."""

    def __init__(self, make: Callable[[], AsyncChannel]) -> None:
        self._make = make
        self._channels: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncChannel] = (
            weakref.WeakKeyDictionary()
        )
        # the last loop's channel, found without a weak reference made per call (a server
        # runs one loop per process); the loop it holds lives until another loop calls
        self._last: tuple[asyncio.AbstractEventLoop | None, AsyncChannel | None] = (None, None)

    def get(self) -> AsyncChannel:
        """The running loop's channel (call it on the loop: no lock needed)."""
        loop = asyncio.get_running_loop()
        last_loop, channel = self._last
        if last_loop is loop and channel is not None:
            return channel
        channel = self._channels.get(loop)
        if channel is None:
            channel = self._channels[loop] = self._make()
        self._last = (loop, channel)
        return channel


_shas: dict[str, str] = {}


def sha_of(source: str) -> str:
    """The SHA1 Redis names ``source`` by (``EVALSHA``), computed here, as redis-py does."""
    sha = _shas.get(source)
    if sha is None:
        sha = _shas[source] = hashlib.sha1(source.encode()).hexdigest()  # noqa: S324 - Redis' name
    return sha


async def run_script(channel: AsyncChannel, source: str, key: str, args: list[Any]) -> Any:
    """``source`` on ``key`` with ``args`` (``EVALSHA``, loaded again after ``NOSCRIPT``: a
    restarted or flushed server)."""
    sha = sha_of(source)
    try:
        return await channel.execute("EVALSHA", sha, 1, key, *args)
    except redis_errors.NoScriptError:
        await channel.execute("SCRIPT", "LOAD", source)
        return await channel.execute("EVALSHA", sha, 1, key, *args)


async def run_script_waiting(
    channel: AsyncChannel, source: str, key: str, args: list[Any], replicas: int, timeout_ms: int
) -> tuple[Any, int]:
    """``source`` then ``WAIT replicas timeout_ms`` on one connection (``WAIT`` counts the
    writes of its own connection): the reply and how many replicas acknowledged."""
    from redis.exceptions import NoScriptError

    sha = sha_of(source)
    commands = (("EVALSHA", sha, 1, key, *args), ("WAIT", replicas, timeout_ms))
    try:
        reply, acknowledged = await channel.execute_many(commands)
    except NoScriptError:
        await channel.execute("SCRIPT", "LOAD", source)
        reply, acknowledged = await channel.execute_many(commands)
    return reply, int(acknowledged)
