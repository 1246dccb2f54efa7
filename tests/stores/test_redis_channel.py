"""RedisStore's own connections (``idempotency.stores.redis_channel``), against a real
Redis: one per thread and process, replaced when it dies, never answering one command
with another's reply, and a script the server forgot loaded again."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from idempotency.exceptions import StoreUnavailable
from idempotency.stores.base import ClaimStatus, StoredResponse
from idempotency.stores.redis import RedisStore
from idempotency.stores.redis_channel import Channel, channel_for
from tests.support.services import redis_url
from tests.support.storms import run_threads, succeeded

pytestmark = [pytest.mark.redis]

RESPONSE = StoredResponse(201, [("Content-Type", "application/json")], b'{"ok": true}')


def connection_id(channel: Channel) -> int:
    return int(channel.execute("CLIENT", "ID"))


@pytest.fixture
def store(redis_client: Any) -> RedisStore:
    store = RedisStore()
    assert store.client is redis_client
    return store


def test_the_store_talks_on_a_connection_of_its_own(store: RedisStore, redis_client: Any) -> None:
    channel = channel_for(redis_client)
    assert channel is not None and store._channel is channel
    pool = redis_client.connection_pool
    in_use = len(pool._in_use_connections)
    claim = store.claim("chan", "k1", fingerprint="f", lease=30, ttl=60)
    assert claim.owned
    assert store.complete("chan", "k1", fence=claim.fence, response=RESPONSE, ttl=60)
    assert len(pool._in_use_connections) == in_use  # nothing checked out of the pool
    # the same connection for every command of this thread
    assert connection_id(channel) == connection_id(channel)
    assert channel.idle >= 1
    replay = store.claim("chan", "k1", fingerprint="f", lease=30, ttl=60)
    assert replay.status is ClaimStatus.COMPLETED and replay.response == RESPONSE


def occupy(channel: Channel, commands: int) -> list[Any]:
    """``commands`` commands at once, each holding its connection for 0.3 s."""
    return succeeded(
        run_threads(commands, lambda _index: channel.execute("BLPOP", "chan:nothing", 0.3))
    )


def test_concurrent_commands_never_share_a_connection(redis_client: Any) -> None:
    channel = channel_for(redis_client)
    assert channel is not None
    channel.execute("PING")
    before = channel.idle
    # four at once need four connections
    assert occupy(channel, 4) == [None] * 4
    assert channel.idle == max(before, 4)
    # and they serve the commands after, opening none
    ids = {connection_id(channel) for _ in range(20)}
    assert len(ids) == 1 and channel.idle == max(before, 4)


def test_a_killed_connection_is_replaced_without_an_error(
    store: RedisStore, redis_client: Any
) -> None:
    channel = channel_for(redis_client)
    assert channel is not None
    occupy(channel, 3)
    assert channel.idle >= 3
    first = connection_id(channel)
    # every connection but this client's own dies, as in a restart: all idle ones
    redis_client.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    # the next store call meets the dead socket, and is sent again on a new one
    claim = store.claim("chan", "k2", fingerprint="f", lease=30, ttl=60)
    assert claim.owned
    assert connection_id(channel) != first
    assert store.lookup("chan", "k2", fingerprint="f") is not None


def test_a_script_the_server_forgot_is_loaded_again(store: RedisStore, redis_client: Any) -> None:
    assert store.claim("chan", "k3", fingerprint="f", lease=30, ttl=60).owned
    redis_client.script_flush()
    claim = store.claim("chan", "k4", fingerprint="f", lease=30, ttl=60)
    assert claim.owned
    again = store.claim("chan", "k4", fingerprint="f", lease=30, ttl=60)
    assert again.status is ClaimStatus.IN_PROGRESS


def test_a_timed_out_reply_is_never_read_as_the_next_ones(redis_client: Any) -> None:
    import redis

    client = redis.Redis.from_url(redis_url(), socket_timeout=0.2)
    channel = Channel(client)
    channel.execute("SET", "chan:slow", "before")
    redis_client.execute_command("CLIENT", "PAUSE", 600, "ALL")
    with pytest.raises(redis.exceptions.TimeoutError):
        channel.execute("GET", "chan:slow")  # its reply comes after the pause
    time.sleep(0.7)
    assert channel.execute("ECHO", "mine") == b"mine"
    assert channel.execute("GET", "chan:slow") == b"before"
    client.close()


def test_an_unreachable_server_is_an_outage_after_one_retry(settings: Any) -> None:
    settings.CACHES = {
        **settings.CACHES,
        "dead": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
            "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2},
        },
    }
    store = RedisStore(cache="dead")
    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        store.claim("chan", "k5", fingerprint="f", lease=30, ttl=60)
    assert time.monotonic() - started < 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_process_opens_its_own_connection(store: RedisStore, redis_client: Any) -> None:
    channel = channel_for(redis_client)
    assert channel is not None
    parent = connection_id(channel)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own connection, and the store works on it
        try:
            child = connection_id(channel)
            owned = store.claim("chan", "k6", fingerprint="f", lease=30, ttl=60).owned
            os.write(write, f"{child} {int(owned)}".encode())
        finally:
            os._exit(0)
    os.close(write)
    child_id, owned = os.read(read, 100).decode().split()
    os.waitpid(pid, 0)
    os.close(read)
    assert int(child_id) != parent and owned == "1"
    assert connection_id(channel) == parent  # the parent's is untouched


def test_a_cluster_client_goes_through_the_client() -> None:
    class NotRedis:
        pass

    assert channel_for(NotRedis()) is None


def test_a_client_side_caching_client_goes_through_the_client() -> None:
    import redis

    cache = pytest.importorskip("redis.cache", reason="client-side caching: redis-py 5.1+")
    CacheConfig = cache.CacheConfig  # noqa: N806 - the class, as redis-py names it

    client = redis.Redis.from_url(redis_url(), protocol=3, cache_config=CacheConfig())
    assert channel_for(client) is None
    client.close()


def test_commands_are_packed_as_the_connection_would_pack_them(redis_client: Any) -> None:
    import redis

    channel = Channel(redis_client)
    connection = redis_client.connection_pool.connection_class(
        **redis_client.connection_pool.connection_kwargs
    )
    if channel._pack is None:  # no hiredis: the connection packs every command itself
        pytest.importorskip("hiredis", reason="with hiredis the channel packs itself")
        raise AssertionError("hiredis is installed but the channel does not pack with it")
    for args in [
        ("SET", "chan:packed", "r\u00e9sum\u00e9"),
        ("SET", "chan:packed", b"\x00\xff"),
        ("SET", "chan:packed", memoryview(b"view")),
        ("EXPIRE", "chan:packed", 60),
        ("SET", "chan:packed", 1.5),
    ]:
        assert channel._pack(args) == b"".join(connection.pack_command(*args)), args
    assert channel._pack(("SCRIPT LOAD", "return 1")) is None  # redis-py splits the name
    # what hiredis refuses is packed (and refused) by redis-py, with its own error
    assert channel._pack(("SET", "chan:packed", None)) is None
    with pytest.raises(redis.exceptions.DataError):
        channel.execute("SET", "chan:packed", None)
    # the replies are the same as through the client
    channel.execute("SET", "chan:packed", "r\u00e9sum\u00e9")
    assert channel.execute("GET", "chan:packed") == redis_client.get("chan:packed")
    sha = redis_client.script_load("return 1")
    assert channel.execute("SCRIPT LOAD", "return 1").decode() == sha


def test_a_connection_that_packs_otherwise_packs_every_command(redis_client: Any) -> None:
    import redis

    class Latin1:  # a custom packer: text in Latin-1, where hiredis would send UTF-8
        def pack(self, *args: Any) -> list[bytes]:
            encode = redis.connection.Encoder("latin-1", "strict", False).encode
            return redis.connection.PythonRespSerializer(6000, encode).pack(*args)

    client = redis.Redis.from_url(redis_url(), command_packer=Latin1())
    try:
        channel = Channel(client)
        assert channel._pack is None
        channel.execute("SET", "chan:latin1", "\u00e9")
        assert redis_client.get("chan:latin1") == b"\xe9"  # packed by the custom packer
    finally:
        client.close()
