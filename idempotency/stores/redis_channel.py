"""RedisStore's commands on a connection of the thread's own, not through the client's pool.

redis-py's command path (``Redis.execute_command``) checks a connection out of the pool
and back in for every command, polls it for stray bytes, records its observability
metrics, dispatches connection events and wraps the call in its retry policy: about
40 µs of the request thread's CPU per command on the benchmark machine, as much as the
round trip's own socket work (bench/RESULTS_BREAKDOWN.md). A store call sends one
command and reads one reply, so :class:`Channel` keeps one connection per thread, made
from the client pool's own connection class and arguments (the same server, database,
credentials, TLS, timeouts and Sentinel lookup), and talks on it directly.

What the client's path does that matters here is done here too:

* a command whose connection fails (``ConnectionError``: reset by a restarted server, an
  idle timeout, a failover) is sent once more on a new connection, as redis-py's default
  retry would; a second failure, or a timeout, is the outage
  (:class:`~idempotency.exceptions.StoreUnavailable`, by the store's guard);
* a connection is never shared across threads, and a forked process (gunicorn's workers
  after ``--preload``) opens its own;
* a script the server does not know (``NOSCRIPT``: a restarted or flushed server) is
  loaded and run again.

A client that is not a plain ``redis.Redis`` (Redis Cluster, another library's) has no
such pool: :func:`channel_for` returns None, and the store goes through the client.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

_channels: weakref.WeakKeyDictionary[Any, Channel] = weakref.WeakKeyDictionary()
_channels_lock = threading.Lock()


def channel_for(client: Any) -> Channel | None:
    """The channel of ``client`` (one per client, shared by every store that uses it),
    or None when ``client`` is not a plain ``redis.Redis``."""
    from redis import Redis

    if not isinstance(client, Redis):
        return None
    channel = _channels.get(client)
    if channel is None:
        with _channels_lock:
            channel = _channels.get(client)
            if channel is None:
                channel = _channels[client] = Channel(client)
    return channel


class Channel:
    """Commands of one client, each thread on a connection of its own."""

    def __init__(self, client: Any) -> None:
        pool = client.connection_pool
        self._connection_class = pool.connection_class
        self._connection_kwargs = pool.connection_kwargs
        self._local = threading.local()

    def _connection(self) -> Any:
        connection = getattr(self._local, "connection", None)
        if connection is None or connection.pid != os.getpid():
            connection = self._connection_class(**self._connection_kwargs)
            self._local.connection = connection
        return connection

    def execute(self, *args: Any) -> Any:
        """Send one command and read its reply."""
        from redis.exceptions import ConnectionError

        try:
            return self._send(self._connection(), args)
        except ConnectionError:
            # a connection that died while idle: once more, on a new one
            return self._send(self._connection(), args)

    def _send(self, connection: Any, args: tuple[Any, ...]) -> Any:
        from redis.exceptions import ResponseError

        try:
            connection.send_command(*args)
            return connection.read_response()
        except ResponseError:
            raise  # a whole reply was read: the connection is fine
        except BaseException:
            # whatever is left of this command on the socket must never be read as the
            # reply to the next one
            connection.disconnect()
            raise

    def run_script(self, script: Any, keys: list[Any], args: list[Any]) -> Any:
        """``script`` (a redis-py ``Script``: its sha and source) on ``keys``/``args``."""
        from redis.exceptions import NoScriptError

        try:
            return self.execute("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            script.sha = self.execute("SCRIPT", "LOAD", script.script)
            if isinstance(script.sha, bytes):
                script.sha = script.sha.decode()
            return self.execute("EVALSHA", script.sha, len(keys), *keys, *args)
