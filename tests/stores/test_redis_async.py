"""RedisStore's async connections (``idempotency.stores.redis_async``), against a real
Redis: one per concurrent task, replaced when it dies, a cancelled or timed-out command's
connection never reused, batches on one connection, and a forgotten script loaded again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from idempotency.stores.base import ClaimStatus, StoredResponse
from idempotency.stores.redis import RedisStore
from idempotency.stores.redis_async import AsyncChannel, Plain, async_twin
from idempotency.stores.redis_wire import Wire
from tests.support.faults import caches_with, dead_redis_url
from tests.support.services import redis_url

pytestmark = [pytest.mark.redis]

T = TypeVar("T")

RESPONSE = StoredResponse(201, [("Content-Type", "application/json")], b'{"ok": true}')


Runner = Callable[[Coroutine[Any, Any, T]], T]


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Runner[Any]:
    """Each test on asyncio's own event loop and on uvloop's (uvicorn's with its
    ``standard`` extra), whose transports the wire takes over too."""
    if request.param == "uvloop":
        import uvloop

        return uvloop.run
    return asyncio.run


def channel_of(client: Any) -> AsyncChannel:
    twin = async_twin(client)
    assert twin is not None
    return AsyncChannel(*twin)


async def connection_id(channel: AsyncChannel) -> int:
    return int(await channel.execute("CLIENT", "ID"))


def test_the_store_talks_on_connections_of_its_own(redis_client: Any, run: Runner[Any]) -> None:
    store = RedisStore()
    pool = redis_client.connection_pool
    in_use = len(pool._in_use_connections)

    async def scenario() -> tuple[Any, AsyncChannel]:
        claim = await store.aclaim("achan", "k1", fingerprint="f", lease=30, ttl=60)
        assert claim.owned
        assert await store.acomplete("achan", "k1", fence=claim.fence, response=RESPONSE, ttl=60)
        channel = store.async_channel()
        assert channel is not None
        assert await connection_id(channel) == await connection_id(channel)  # reused
        return await store.alookup("achan", "k1", fingerprint="f"), channel

    replay, channel = run(scenario())
    assert replay is not None and replay.status is ClaimStatus.COMPLETED
    assert replay.response == RESPONSE
    assert channel.idle == 1  # one task at a time: one connection
    assert len(pool._in_use_connections) == in_use  # the sync pool was not used


def test_concurrent_tasks_never_share_a_connection(redis_client: Any, run: Runner[Any]) -> None:
    channel = channel_of(redis_client)

    async def scenario() -> tuple[list[Any], set[int]]:
        held = await asyncio.gather(
            *(channel.execute("BLPOP", "achan:nothing", 0.3) for _ in range(4))
        )
        ids = {await connection_id(channel) for _ in range(10)}
        return held, ids

    held, ids = run(scenario())
    assert held == [None] * 4
    assert channel.idle == 4  # four at once needed four connections, all put back
    assert len(ids) == 1  # and one task after them reuses one


def test_replies_go_to_their_own_commands_under_gather(redis_client: Any, run: Runner[Any]) -> None:
    channel = channel_of(redis_client)

    async def scenario() -> list[Any]:
        return await asyncio.gather(*(channel.execute("ECHO", f"m{i}") for i in range(50)))

    assert run(scenario()) == [f"m{i}".encode() for i in range(50)]


def test_a_batch_reads_every_reply_before_raising_the_first_error(
    redis_client: Any, run: Runner[Any]
) -> None:
    from redis.exceptions import ResponseError

    channel = channel_of(redis_client)
    redis_client.set("achan:text", "x")

    async def scenario() -> tuple[Any, Any]:
        with pytest.raises(ResponseError):
            await channel.execute_many((("HGET", "achan:text", "f"), ("ECHO", "after")))
        # the connection went back whole: the next command reads its own reply
        return await channel.execute("ECHO", "next"), channel.idle

    assert run(scenario()) == (b"next", 1)


def test_a_killed_connection_is_replaced_without_an_error(
    redis_client: Any, run: Runner[Any]
) -> None:
    store = RedisStore()

    async def scenario() -> tuple[int, int, Any]:
        channel = store.async_channel()
        assert channel is not None
        await channel.execute("PING")
        first = await connection_id(channel)
        # every connection but the sync client's own dies, as in a restart
        redis_client.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        claim = await store.aclaim("achan", "k2", fingerprint="f", lease=30, ttl=60)
        assert claim.owned
        return first, await connection_id(channel), claim

    first, after, _ = run(scenario())
    assert after != first


def test_a_cancelled_command_drops_its_connection(redis_client: Any, run: Runner[Any]) -> None:
    """A task cancelled while it waits for a reply (a client that went away, a timeout of
    the application's) leaves that reply on the socket: the connection is dropped."""
    channel = channel_of(redis_client)
    redis_client.delete("achan:list")

    async def scenario() -> tuple[int, Any, Any]:
        waiting = asyncio.ensure_future(channel.execute("BLPOP", "achan:list", 2))
        await asyncio.sleep(0.2)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        idle = channel.idle
        redis_client.rpush("achan:list", "late")  # the cancelled BLPOP's reply never came
        echoed = await channel.execute("ECHO", "mine")
        return idle, echoed, await channel.execute("LLEN", "achan:list")

    idle, echoed, length = run(scenario())
    assert idle == 0
    assert echoed == b"mine"
    assert length == 1  # nobody popped it: the dropped connection's BLPOP ended with it


def test_a_timed_out_reply_is_never_read_as_the_next_ones(
    redis_client: Any, run: Runner[Any]
) -> None:
    import redis

    channel = channel_of(redis.Redis.from_url(redis_url(), socket_timeout=0.2))

    async def scenario() -> tuple[Any, Any]:
        await channel.execute("SET", "achan:slow", "before")
        redis_client.execute_command("CLIENT", "PAUSE", 600, "ALL")
        with pytest.raises(redis.exceptions.TimeoutError):
            await channel.execute("GET", "achan:slow")  # its reply comes after the pause
        await asyncio.sleep(0.7)
        return await channel.execute("ECHO", "mine"), await channel.execute("GET", "achan:slow")

    assert run(scenario()) == (b"mine", b"before")


def test_a_script_the_server_forgot_is_loaded_again(redis_client: Any, run: Runner[Any]) -> None:
    store = RedisStore()

    async def scenario() -> tuple[Any, Any]:
        assert (await store.aclaim("achan", "k3", fingerprint="f", lease=30, ttl=60)).owned
        redis_client.script_flush()
        claim = await store.aclaim("achan", "k4", fingerprint="f", lease=30, ttl=60)
        again = await store.aclaim("achan", "k4", fingerprint="f", lease=30, ttl=60)
        return claim, again

    claim, again = run(scenario())
    assert claim.owned
    assert again.status is ClaimStatus.IN_PROGRESS


def test_a_batch_with_a_forgotten_script_is_sent_again(redis_client: Any, run: Runner[Any]) -> None:
    """``WAIT`` follows the script on one connection: after ``NOSCRIPT`` both go again."""
    # WAIT for a replica this server does not have, 10 ms
    store = RedisStore(wait_replicas=1, wait_timeout=0.01)
    redis_client.script_flush()

    async def scenario() -> tuple[Any, int | None]:
        from idempotency.stores.redis_scripts import RELEASE

        channel = store.async_channel()
        assert channel is not None
        return await store._arun(channel, RELEASE, store.record_key("achan", "k5"), [1])

    released, acknowledged = run(scenario())
    assert released == 0 and acknowledged == 0  # no record to release; no replica to ask


def test_an_unreachable_server_is_an_outage_after_one_retry(run: Runner[Any]) -> None:
    from django.test import override_settings

    from idempotency.exceptions import StoreUnavailable

    with override_settings(CACHES=caches_with("dead", dead_redis_url())):
        store = RedisStore(cache="dead")
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            run(store.aclaim("achan", "k6", fingerprint="f", lease=30, ttl=60))
    assert time.monotonic() - started < 2  # refused twice, not waited on


def test_clients_without_a_twin_go_through_a_thread() -> None:
    import redis

    assert async_twin(object()) is None
    blocking = redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(redis_url()))
    assert async_twin(blocking) is None
    plain = async_twin(redis.Redis.from_url(redis_url()))
    assert plain is not None and plain[0] is redis.asyncio.Connection


def test_connections_are_read_by_the_wire(redis_client: Any, run: Runner[Any]) -> None:
    channel = channel_of(redis_client)
    assert run(channel.execute("ECHO", "x")) == b"x"
    assert [type(link) for link in channel._idle] == [Wire]


def test_a_connection_with_health_checks_keeps_redis_asyncios_read_path(run: Runner[Any]) -> None:
    import redis
    from redis.exceptions import ResponseError

    channel = channel_of(redis.Redis.from_url(redis_url(), health_check_interval=30))

    async def scenario() -> Any:
        await channel.execute("SET", "achan:plain", "x")
        with pytest.raises(ResponseError):
            await channel.execute_many((("HGET", "achan:plain", "f"), ("ECHO", "after")))
        value = await channel.execute("GET", "achan:plain")
        links = [type(link) for link in channel._idle]
        await channel.aclose()
        return value, links, channel.idle

    assert run(scenario()) == (b"x", [Plain], 0)


def test_a_command_outlasting_an_earlier_ones_deadline_is_not_timed_out(run: Runner[Any]) -> None:
    """One timer per connection, armed by the first command: when it fires for that
    command's deadline while a later command waits, it waits on for the later one's."""
    import redis

    channel = channel_of(redis.Redis.from_url(redis_url(), socket_timeout=0.5))

    async def scenario() -> list[Any]:
        started = time.monotonic()
        first = await channel.execute("BLPOP", "achan:none", 0.3)  # arms the timer for 0.5
        second = await channel.execute("BLPOP", "achan:none", 0.3)  # waits past 0.5
        assert time.monotonic() - started >= 0.6
        return [first, second]

    assert run(scenario()) == [None, None]


def test_a_push_message_is_never_read_as_a_reply(redis_client: Any, run: Runner[Any]) -> None:
    """RESP3 (redis-py 8's default): a server's push message between replies (here a
    client-tracking invalidation) answers no command. The wire reads RESP3 where hiredis
    marks push messages (3.2+); before, ``redis.asyncio`` does (and redis-py 5.0 reads
    a push as a reply, which is why the store's connections never ask for pushes)."""
    import hiredis
    import redis

    if not hasattr(hiredis, "PushNotification"):
        pytest.skip("hiredis < 3.2 cannot tell a push message from a reply")
    channel = channel_of(redis.Redis.from_url(redis_url(), protocol=3))

    async def scenario() -> tuple[Any, Any]:
        await channel.execute("SET", "achan:tracked", "1")
        await channel.execute("CLIENT", "TRACKING", "ON")
        await channel.execute("GET", "achan:tracked")
        redis_client.set("achan:tracked", "2")  # the server pushes an invalidation to us
        await asyncio.sleep(0.05)
        return await channel.execute("ECHO", "after"), await channel.execute("GET", "achan:tracked")

    assert run(scenario()) == (b"after", b"2")
    assert [type(link) for link in channel._idle] == [Wire]


def test_a_resp2_connection_is_read_by_the_wire(run: Runner[Any]) -> None:
    import redis

    channel = channel_of(redis.Redis.from_url(redis_url(), protocol=2))
    assert run(channel.execute_many((("ECHO", "a"), ("PING",)))) == [b"a", b"PONG"]
    assert [type(link) for link in channel._idle] == [Wire]


def test_a_reply_nobody_asked_for_closes_the_connection(
    redis_client: Any, run: Runner[Any]
) -> None:
    """Bytes that answer no command (a server or proxy out of step) are never taken for
    the next command's reply: the connection is closed, the next command opens another."""
    from idempotency.stores.redis_wire import Wire as WireClass

    channel = channel_of(redis_client)

    async def scenario() -> tuple[bool, Any, int]:
        await channel.execute("PING")
        (wire,) = channel._idle
        assert isinstance(wire, WireClass)
        wire.data_received(b"+STRAY\r\n")  # as if the server had sent it between commands
        closed = wire.closed
        return closed, await channel.execute("ECHO", "mine"), channel.idle

    assert run(scenario()) == (True, b"mine", 1)


def test_bytes_hiredis_cannot_parse_fail_the_command(redis_client: Any, run: Runner[Any]) -> None:
    from redis.exceptions import InvalidResponse

    channel = channel_of(redis_client)

    async def scenario() -> Any:
        await channel.execute("PING")
        (wire,) = channel._idle
        pending = asyncio.ensure_future(channel.execute("BLPOP", "achan:none", 1))
        await asyncio.sleep(0.05)
        wire.data_received(b"?garbage\r\n")
        with pytest.raises(InvalidResponse):
            await pending
        return await channel.execute("ECHO", "after")

    assert run(scenario()) == b"after"
