"""One Redis connection's replies on the event loop, parsed by hiredis as they arrive.

``redis.asyncio``'s connection reads a reply through an ``asyncio.StreamReader`` under a
timeout context, and writes under ``asyncio.wait_for`` (on Python 3.11 a task of its
own): per command, two timers, a task and several turns of the event loop, more of the
loop's CPU than the rest of a keyed request's Redis work (counted in
bench/RESULTS_BREAKDOWN.md). A :class:`Wire` takes over the transport of a connection
that ``redis.asyncio`` opened (TCP, TLS or a Unix socket, with its handshake: ``AUTH``,
``SELECT``, the client's name), becomes that transport's protocol, and from then on:

* a command is one ``transport.write`` (a few hundred bytes: the transport sends them at
  once, or buffers them);
* replies are fed to a ``hiredis.Reader`` in ``data_received``, and the waiting command's
  future is resolved when all its replies are in: one turn of the loop per round trip;
* the read timeout (the connection's ``socket_timeout``) is one timer per connection,
  armed when a command starts with none armed and re-armed only when it fires early:
  not a timer per command;
* error replies are the exceptions ``redis.asyncio`` gives (``NoScriptError``,
  ``ResponseError``, ...), made by the connection's own parser's ``parse_error``.

Connections that speak RESP2 or RESP3 (redis-py 8's default) and need no health checks
are taken over (:func:`can_take_over`); any other stays with ``redis.asyncio``'s own read
path. A RESP3 push message (a server's maintenance notice, a client-tracking
invalidation) is not a reply to a command: it is skipped (the connection serves no
subscription or tracking, and a notice of a moved or closing server is met as a
``ConnectionError``, which the channel retries once on a new connection).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from idempotency.stores.redis_channel import redis_errors


def can_take_over(connection: Any) -> bool:
    """Whether :class:`Wire` may read ``connection``'s replies itself: RESP2 (or RESP3 with
    a hiredis that marks push messages), no health checks, and the transport and parser
    a ``redis.asyncio`` connection has had from 4.2 to 8.x (checked, not assumed:
    another version keeps its own read path)."""
    try:
        import hiredis
    except ImportError:  # redis-py without hiredis: its own parser reads
        return False
    protocol = str(getattr(connection, "protocol", 2) or 2)
    return (
        (protocol == "2" or (protocol == "3" and hasattr(hiredis, "PushNotification")))
        and not getattr(connection, "health_check_interval", 0)
        and getattr(connection, "_writer", None) is not None
        and callable(getattr(getattr(connection, "_parser", None), "parse_error", None))
        and getattr(connection, "encoder", None) is not None
    )


class Wire(asyncio.Protocol):
    """The replies of one connection ``redis.asyncio`` opened; :meth:`exchange` sends a
    batch of packed commands and returns their replies (error replies as exceptions,
    not raised)."""

    def __init__(self, connection: Any) -> None:
        import hiredis
        from redis.exceptions import InvalidResponse

        self._loop = asyncio.get_running_loop()
        self._timeout: float | None = connection.socket_timeout or None
        encoder = connection.encoder
        options: dict[str, Any] = {
            "protocolError": InvalidResponse,
            "replyError": connection._parser.parse_error,
            "errors": encoder.encoding_errors,
        }
        if encoder.decode_responses:
            options["encoding"] = encoder.encoding
        self._parser = hiredis.Reader(**options)
        self._push: type[Any] | None = getattr(hiredis, "PushNotification", None)
        self._replies: list[Any] = []
        self._expected = 0
        self._waiter: asyncio.Future[None] | None = None
        self._deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.closed = False
        # the transport is the wire's from now on. Its stream writer stays referenced here
        # (collected, it would close the transport), the connection object lets go of
        # both: collected after its loop closed, redis-py before 5.1 would close them on
        # that closed loop and raise in its __del__
        self._writer = connection._writer
        transport = self._writer.transport
        self._transport = transport
        transport.set_protocol(self)
        connection._reader = connection._writer = None

    async def exchange(self, packed: bytes, count: int) -> list[Any]:
        """Write ``packed`` (``count`` commands) and wait for their ``count`` replies."""
        if self.closed:
            raise redis_errors.ConnectionError("Connection closed by server.")
        loop = self._loop
        waiter = self._waiter = loop.create_future()
        replies = self._replies = []
        self._expected = count
        if self._timeout is not None:
            self._deadline = loop.time() + self._timeout
            if self._timer is None:
                self._timer = loop.call_at(self._deadline, self._expire)
        self._transport.write(packed)
        try:
            await waiter
        finally:
            self._waiter = None
        return replies

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        replies: list[Any] = self._replies if waiter is not None else []
        parser = self._parser
        push = self._push
        try:
            parser.feed(data)
            reply = parser.gets()
            while reply is not False:
                if push is None or type(reply) is not push:  # a push message answers nothing
                    replies.append(reply)
                reply = parser.gets()
        except Exception as exc:  # noqa: BLE001 - bytes hiredis cannot parse: the stream is lost
            self._fail(exc)
            return
        if waiter is None:
            if replies:  # a reply no command asked for: the connection is out of step
                from redis.exceptions import InvalidResponse

                self._fail(InvalidResponse("Redis sent a reply no command asked for"))
            return
        if len(replies) >= self._expected and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: Exception) -> None:
        """The connection can no longer be read in step: fail the waiting command with
        ``exc`` (its caller drops the connection) and close it."""
        self.closed = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self._transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        from redis.exceptions import ConnectionError

        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(ConnectionError("Connection closed by server."))

    def _expire(self) -> None:
        """The connection's one timer: a command still waiting past its deadline times
        out (and its connection is dropped by the caller); one that is not yet late
        re-arms the timer for its own deadline; none waiting leaves it unarmed."""
        from redis.exceptions import TimeoutError

        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._loop.time() >= self._deadline:
            waiter.set_exception(TimeoutError("Timeout reading from socket"))
        else:
            self._timer = self._loop.call_at(self._deadline, self._expire)

    async def close(self) -> None:
        """Close the connection, not waiting for the server."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        with contextlib.suppress(Exception):  # a loop closing, a socket already gone
            self._transport.abort()


async def disconnect_quietly(connection: Any) -> None:
    """Close a ``redis.asyncio`` connection without waiting for the server, whatever state
    it is in (a broken socket has nothing left to say)."""
    with contextlib.suppress(Exception):
        await connection.disconnect(nowait=True)
