"""RedisStore's commands on connections of its own, not through the client's pool.

redis-py's command path (``Redis.execute_command``) checks a connection out of the pool
and back in for every command, polls it for stray bytes, records its observability
metrics, dispatches connection events and wraps the call in its retry policy: as much
of the request thread's CPU per command as the round trip's own socket work (measured
in bench/RESULTS_BREAKDOWN.md). A store call sends one
command and reads one reply, so :class:`Channel` keeps connections of its own, made
from the client pool's own connection class and arguments (the same server, database,
credentials, TLS, timeouts and Sentinel lookup), and talks on them directly: a command
takes an idle one (or opens one) and puts it back with its reply read.

What the client's path does that matters here is done here too:

* a command whose connection fails (``ConnectionError``: reset by a restarted server, an
  idle timeout, a failover) is sent once more on a new connection, the idle ones
  dropped too, as redis-py's default retry would; a second failure, or a timeout, is
  the outage
  (:class:`~idempotency.exceptions.StoreUnavailable`, by the store's guard);
* a connection serves one command at a time, and a forked process (gunicorn's workers
  after ``--preload``, Celery's prefork pool) opens its own;
* a script the server does not know (``NOSCRIPT``: a restarted or flushed server) is
  loaded and run again;
* a command is packed as redis-py would pack it on these connections. Where that is
  hiredis' ``pack_command`` (hiredis installed, no custom packer), the channel calls it
  itself: redis-py's serializer first copies every argument in a generator, a sizeable
  part of a command's instructions (bench/RESULTS_BREAKDOWN.md). Whether the two
  agree is checked once per channel, on arguments of every type a store sends.

A client that is not a plain ``redis.Redis`` (Redis Cluster, another library's), or
whose pool wraps its connections for client-side caching, is left alone:
:func:`channel_for` returns None, and the store goes through the client.
"""

from __future__ import annotations

import importlib
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any


def _redis_errors() -> Any:
    try:
        return importlib.import_module("redis.exceptions")
    except ImportError:  # pragma: no cover - redis is an optional extra (no channel without it)
        return None


#: redis-py's exceptions, imported once: an import statement in a function runs the
#: import machinery on every call (~600 ns; a command took three).
redis_errors: Any = _redis_errors()

_channels: weakref.WeakKeyDictionary[Any, Channel] = weakref.WeakKeyDictionary()
_channels_lock = threading.Lock()


def channel_for(client: Any) -> Channel | None:
    """The channel of ``client`` (one per client, shared by every store that uses it),
    or None when ``client`` is not a plain ``redis.Redis``."""
    from redis import Redis

    if not isinstance(client, Redis):
        return None
    if getattr(client.connection_pool, "cache", None) is not None:
        return None  # client-side caching wraps the pool's connections: leave them to it
    channel = _channels.get(client)
    if channel is None:
        with _channels_lock:
            channel = _channels.get(client)
            if channel is None:
                channel = _channels[client] = Channel(client)
    return channel


class Channel:
    """Commands of one client, each on a connection nobody else is using at the time.

    Idle connections wait on a plain list: ``list.pop()`` and ``list.append()`` are
    atomic in CPython, so taking one and putting it back needs no lock, and there are
    never more connections than commands at once have needed (threads, or greenlets
    under gevent)."""

    def __init__(self, client: Any) -> None:
        pool = client.connection_pool
        self._connection_class = pool.connection_class
        self._connection_kwargs = pool.connection_kwargs
        self._pid = os.getpid()
        self._idle: list[Any] = []
        self._pack = hiredis_packer(self._connection_class(**self._connection_kwargs))

    @property
    def idle(self) -> int:
        """How many connections wait for a command (all of them, between commands)."""
        return len(self._idle)

    def execute(self, *args: Any) -> Any:
        """Send one command and read its reply."""
        try:
            return self._send(args)
        except redis_errors.ConnectionError:
            # a connection that died while idle (a restarted server, an idle timeout): the
            # others idle beside it most likely died with it; once more, on a new one
            stale, self._idle = self._idle, []
            for connection in stale:
                connection.disconnect()
            return self._send(args)

    def _send(self, args: tuple[Any, ...]) -> Any:
        if self._pid != os.getpid():  # a forked child: the parent's sockets are not ours
            self._idle, self._pid = [], os.getpid()
        try:
            connection = self._idle.pop()
        except IndexError:
            connection = self._connection_class(**self._connection_kwargs)
        try:
            packed = self._pack(args) if self._pack is not None else None
            if packed is not None:
                connection.send_packed_command((packed,))
            else:
                connection.send_command(*args)
            reply = connection.read_response()
        except redis_errors.ResponseError:
            self._idle.append(connection)  # a whole reply was read: the connection is fine
            raise
        except BaseException:
            # whatever is left of this command on the socket must never be read as the
            # reply to the next one: the connection is dropped
            connection.disconnect()
            raise
        self._idle.append(connection)
        return reply

    def run_script(self, script: Any, keys: list[Any], args: list[Any]) -> Any:
        """``script`` (a redis-py ``Script``: its sha and source) on ``keys``/``args``."""
        try:
            return self.execute("EVALSHA", script.sha, len(keys), *keys, *args)
        except redis_errors.NoScriptError:
            script.sha = self.execute("SCRIPT", "LOAD", script.script)
            if isinstance(script.sha, bytes):
                script.sha = script.sha.decode()
            return self.execute("EVALSHA", script.sha, len(keys), *keys, *args)


#: Arguments of every type a store sends, non-ASCII text included.
_PROBE = ("EVALSHA", "0" * 40, 1, "p:{k}:rec", b"\x00body\xff", "r\u00e9sum\u00e9", 86_400_000)


def hiredis_packer(connection: Any) -> Callable[[tuple[Any, ...]], bytes | None] | None:
    """hiredis' ``pack_command`` when it packs exactly as ``connection`` would (redis-py
    packs with it too when hiredis is installed and no other packer is configured), or
    None: the channel then lets the connection pack."""
    try:
        from hiredis import pack_command
    except ImportError:
        return None

    def pack(args: tuple[Any, ...]) -> bytes | None:
        name = args[0]
        if " " in name if isinstance(name, str) else b" " in name:
            return None  # redis-py splits "SCRIPT LOAD" into two arguments: let it
        try:
            packed: bytes = pack_command(args)  # hiredis' stub declares no return type
            return packed
        except TypeError:  # an argument hiredis cannot pack: redis-py's own error
            return None

    try:
        theirs = b"".join(connection.pack_command(*_PROBE))
    except Exception:  # noqa: BLE001 - a packer that refuses the probe: use it as it is
        return None
    return pack if pack(_PROBE) == theirs else None
