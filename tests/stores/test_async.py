"""The stores' ``a*`` twins: the contract of their sync methods, awaited.

RedisStore's are native (``redis.asyncio``, one client per running loop), DatabaseStore's
run in executor threads that look after their own connections, CacheStore's take the
default (a thread per call). Each test runs its coroutine under ``asyncio.run``: a new
event loop every time, as an ASGI server's workers and a test runner's loops are.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from django.db import connection, connections
from django.test import override_settings

from idempotency.exceptions import StoreCorrupted, StoreUnavailable
from idempotency.stores.base import BaseStore, ClaimStatus, StoredResponse
from idempotency.stores.cache import CacheStore
from idempotency.stores.database import DatabaseStore
from idempotency.stores.redis import RedisStore
from tests.support.faults import caches_with, dead_redis_url

T = TypeVar("T")
SCOPE = "auth.user:1"
RESPONSE = StoredResponse(201, [("Content-Type", "application/json")], b'{"id": 1}\x00\xff')


def run(coroutine: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await coroutine()

    return asyncio.run(main())


@pytest.fixture(
    params=[
        pytest.param("database", id="database", marks=pytest.mark.server_db),
        pytest.param("redis", id="redis", marks=pytest.mark.redis),
        pytest.param("cache", id="cache"),
    ]
)
def store(request: pytest.FixtureRequest, transactional_db: Any) -> Iterator[BaseStore]:
    """Each store; the database one on a server database (its executor threads commit on
    connections of their own, so the test's must be a real one, not a transaction)."""
    if request.param == "database":
        yield DatabaseStore()
    elif request.param == "redis":
        yield RedisStore()
    else:
        yield CacheStore()


@pytest.fixture
def key() -> str:
    return f"key-{uuid.uuid4()}"


async def aclaim(store: BaseStore, key: str, fp: str = "fp1", lease: float = 30) -> Any:
    return await store.aclaim(
        SCOPE, key, fingerprint=fp, lease=lease, ttl=60, method="POST", route="/x/"
    )


def test_claim_complete_lookup_replay(store: BaseStore, key: str) -> None:
    async def scenario() -> tuple[Any, ...]:
        first = await aclaim(store, key)
        in_progress = await aclaim(store, key)
        looked = await store.alookup(SCOPE, key, fingerprint="fp1")
        done = await store.acomplete(SCOPE, key, fence=first.fence, response=RESPONSE, ttl=60)
        replay = await aclaim(store, key)
        mismatch = await aclaim(store, key, fp="other")
        peeked = await store.apeek(SCOPE, key, fingerprint="fp1")
        return first, in_progress, looked, done, replay, mismatch, peeked

    first, in_progress, looked, done, replay, mismatch, peeked = run(scenario)
    assert first.status is ClaimStatus.CLAIMED and first.fence > 0
    assert in_progress.status is ClaimStatus.IN_PROGRESS and 0 < in_progress.retry_after <= 30
    assert looked.status is ClaimStatus.IN_PROGRESS
    assert done is True
    assert replay.status is ClaimStatus.COMPLETED
    assert replay.response.body == RESPONSE.body
    assert replay.response.status == 201
    assert list(replay.response.headers) == list(RESPONSE.headers)
    assert mismatch.status is ClaimStatus.MISMATCH
    assert peeked.status is ClaimStatus.COMPLETED and peeked.response.body == RESPONSE.body
    # the sync twin reads what the async one wrote
    assert store.lookup(SCOPE, key, fingerprint="fp1").status is ClaimStatus.COMPLETED


def test_concurrent_claims_one_owner(store: BaseStore, key: str) -> None:
    async def scenario() -> list[Any]:
        return list(await asyncio.gather(*(aclaim(store, key) for _ in range(16))))

    claims = run(scenario)
    assert [c.status for c in claims].count(ClaimStatus.CLAIMED) == 1
    assert {c.status for c in claims} == {ClaimStatus.CLAIMED, ClaimStatus.IN_PROGRESS}


def test_stale_owner_is_refused(store: BaseStore, key: str) -> None:
    async def scenario() -> tuple[Any, ...]:
        owner = await aclaim(store, key)
        stale = owner.fence + 1
        return (
            await store.acomplete(SCOPE, key, fence=stale, response=RESPONSE, ttl=60),
            await store.arelease(SCOPE, key, fence=stale),
            await store.aextend(SCOPE, key, fence=stale, lease=30),
            await store.asave_recovery_point(SCOPE, key, fence=stale, name="paid"),
            await store.aextend(SCOPE, key, fence=owner.fence, lease=30),
            await store.asave_recovery_point(
                SCOPE, key, fence=owner.fence, name="paid", data={"n": 1}
            ),
            await store.arelease(SCOPE, key, fence=owner.fence),
            await aclaim(store, key),
        )

    *stale, extended, saved, released, again = run(scenario)
    assert stale == [False, False, False, False]
    assert (extended, saved, released) == (True, True, True)
    # released with a recovery point: the next owner resumes from it
    assert again.status is ClaimStatus.CLAIMED
    assert (again.recovery_point, again.recovery_data) == ("paid", {"n": 1})


def test_release_delete_and_count(store: BaseStore, key: str) -> None:
    async def scenario() -> tuple[Any, ...]:
        owner = await aclaim(store, key)
        released = await store.arelease(SCOPE, key, fence=owner.fence)
        gone = await store.alookup(SCOPE, key, fingerprint="fp1")
        await aclaim(store, key)
        deleted = await store.adelete(SCOPE, key)
        after = await store.alookup(SCOPE, key, fingerprint="fp1")
        scope = f"quota-{uuid.uuid4()}"
        counts = [await store.acount_new_record(scope, window=60) for _ in range(3)]
        return released, gone, deleted, after, counts

    released, gone, deleted, after, counts = run(scenario)
    assert released is True and gone is None
    assert deleted is True and after is None
    assert [count for count, _ in counts] == [1, 2, 3]
    assert all(0 < left <= 60 for _, left in counts)


# -- RedisStore: native, per loop, errors mapped -----------------------------------------


@pytest.mark.redis
def test_redis_clients_per_loop(key: str) -> None:
    store = RedisStore()

    async def channel_and_claim() -> tuple[Any, Any]:
        channel = store.connector.async_client()
        assert channel is store.connector.async_client()  # one per loop
        return channel, await aclaim(store, key)

    first_channel, first = run(channel_and_claim)
    second_channel, second = run(channel_and_claim)  # a new loop: a new channel, no error
    assert first_channel is not None and second_channel is not None
    assert first_channel is not second_channel
    assert first.status is ClaimStatus.CLAIMED
    assert second.status is ClaimStatus.IN_PROGRESS


@pytest.mark.redis
def test_redis_async_is_native_not_a_thread(key: str) -> None:
    """RedisStore's twins never call the sync methods (which a thread would run)."""
    store = RedisStore()

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a sync method ran")

    for name in ("claim", "lookup", "complete", "release", "extend", "delete"):
        setattr(store, name, refused)

    async def scenario() -> Any:
        owner = await aclaim(store, key)
        await store.aextend(SCOPE, key, fence=owner.fence, lease=30)
        await store.acomplete(SCOPE, key, fence=owner.fence, response=RESPONSE, ttl=60)
        return await store.alookup(SCOPE, key, fingerprint="fp1")

    assert run(scenario).status is ClaimStatus.COMPLETED


@pytest.mark.redis
def test_redis_outage_is_store_unavailable(key: str, outages: list[dict[str, Any]]) -> None:
    with override_settings(CACHES=caches_with("down", dead_redis_url())):
        store = RedisStore(cache="down")
        with pytest.raises(StoreUnavailable):
            run(lambda: aclaim(store, key))
        with pytest.raises(StoreUnavailable):
            run(lambda: store.acount_new_record(SCOPE, window=60))
    assert [(o["backend"], o["operation"]) for o in outages] == [
        ("redis", "aclaim"),
        ("redis", "acount_new_record"),
    ]


@pytest.mark.redis
def test_redis_wrong_type_is_store_corrupted(key: str, redis_client: Any) -> None:
    store = RedisStore()
    redis_client.set(store.record_key(SCOPE, key), "not a hash")
    with pytest.raises(StoreCorrupted):
        run(lambda: aclaim(store, key))
    with pytest.raises(StoreCorrupted):
        run(lambda: store.alookup(SCOPE, key, fingerprint="fp1"))


# -- DatabaseStore: connections of executor threads recover ------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_database_connection_recovers_from_a_killed_one(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A persistent connection of the thread the async calls run in, killed by the
    server, fails one call (503, an outage) and is replaced on the next, never left
    broken for good."""
    store = DatabaseStore()
    settings_dict = connections[store.using].settings_dict
    monkeypatch.setitem(settings_dict, "CONN_MAX_AGE", 600)  # persistent: kept between calls
    monkeypatch.setitem(settings_dict, "CONN_HEALTH_CHECKS", False)

    def backend_pid() -> int:
        connections[store.using].ensure_connection()
        return int(connections[store.using].connection.info.backend_pid)

    def terminate(pid: int) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        finally:
            connection.close()

    async def scenario() -> tuple[Any, ...]:
        loop = asyncio.get_running_loop()
        # one executor thread: every call meets the connection the previous one left
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        owner = await aclaim(store, key)
        killed = await store.run_in_thread(backend_pid)
        with ThreadPoolExecutor(max_workers=1) as other:  # another session kills it
            await loop.run_in_executor(other, terminate, killed)
        try:
            await store.alookup(SCOPE, key, fingerprint="fp1")
            failed = False
        except StoreUnavailable:
            failed = True
        looked = await store.alookup(SCOPE, key, fingerprint="fp1")
        again = await store.run_in_thread(backend_pid)
        done = await store.acomplete(SCOPE, key, fence=owner.fence, response=RESPONSE, ttl=60)
        await store.run_in_thread(connections.close_all)
        return killed, failed, looked, again, done

    killed, failed, looked, again, done = run(scenario)
    assert failed  # the dead connection's one failure, an outage (no health checks)
    assert looked.status is ClaimStatus.IN_PROGRESS  # the next call recovered
    assert again != killed
    assert done is True
