"""@idempotent_function under concurrency: nested and concurrent calls, expired leases and
stale owners (the clock moved, never slept past), waits, twenty threads on one key, atomic
mode's duplicates."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from idempotency import idempotent_function
from idempotency.exceptions import CallInProgress
from idempotency.functions.arguments import fingerprint_of, qualified_name
from idempotency.models import IdempotencyRecord
from idempotency.utils.backoff import Backoff
from tests.support.clocks import age
from tests.support.counting import Counter, unique
from tests.support.stores import ALL_STORES, DB_STORE, REDIS_STORE, store_of, store_params
from tests.support.storms import Overlap, run_threads

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("store", ALL_STORES)
def test_nested_call_of_a_running_key_raises_in_progress(store: str) -> None:
    @idempotent_function(key="nested:{ref}", store=store, wait=0, fingerprint=["ref"])
    def outer(ref: str, depth: int = 0) -> str:
        if depth == 0:
            with pytest.raises(CallInProgress) as caught:
                outer(ref, depth=1)
            assert caught.value.key == f"nested:{ref}"
        return "outer"

    assert outer(unique("ref")) == "outer"


@pytest.mark.parametrize("store", store_params("redis", "cache"))
def test_expired_lease_is_taken_over_and_the_stale_owner_fenced_off(
    store: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A first call whose lease is not renewed (a store without keep-alive, or an owner
    paused past its lease) loses its key after the lease; its late result is refused."""
    caplog.set_level(logging.WARNING, logger="idempotency")
    calls = Counter()
    claimed, release_first = threading.Event(), threading.Event()

    class WithoutKeepAlive(type(store)):  # type: ignore[misc]
        def extend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
            raise NotImplementedError

    without_keepalive = WithoutKeepAlive()

    @idempotent_function(key="slow:{ref}", store=without_keepalive, lease=30)
    def slow(ref: str) -> dict[str, int]:
        count = calls()
        if count == 1:
            claimed.set()
            release_first.wait(30)
        return {"run": count}

    ref = unique("ref")
    first: list[Any] = []
    thread = threading.Thread(target=lambda: first.append(slow(ref)))
    thread.start()
    assert claimed.wait(30)
    age(without_keepalive, "functions", f"slow:{ref}", 31)  # the first call's lease runs out
    assert slow(ref) == {"run": 2}  # taken over
    release_first.set()
    thread.join(30)
    assert first == [{"run": 1}]
    assert any("was refused" in r.getMessage() for r in caplog.records)
    assert slow(ref) == {"run": 2}  # the new owner's result stands
    assert calls.count == 2


def test_stale_owner_takeover_with_the_database_store() -> None:
    """Same contract through a claim made directly on the store (one connection)."""
    calls = Counter()

    @idempotent_function(key="db-slow:{ref}", store=store_of(DB_STORE), mode="lease")
    def work(ref: str) -> int:
        return calls()

    ref = unique("ref")
    store = store_of(DB_STORE)
    fingerprint = fingerprint_of("function", qualified_name(work.__wrapped__))
    # a long lease, aged past below: a stalled test process cannot let it run out before
    # the duplicate meets it (a 0.5 s lease could)
    dead = store.claim("functions", f"db-slow:{ref}", fingerprint=fingerprint, lease=30, ttl=60)
    assert dead.owned
    with pytest.raises(CallInProgress):
        idempotent_function(key="db-slow:{ref}", store=store_of(DB_STORE), lease=60, mode="lease")(
            work.__wrapped__
        )(ref)
    age(store, "functions", f"db-slow:{ref}", 31)
    assert work(ref) == 1  # the dead owner's lease ran out: taken over
    from idempotency.stores.base import StoredResponse

    assert not store.complete(
        "functions",
        f"db-slow:{ref}",
        fence=dead.fence,
        response=StoredResponse(200, [], b"9"),
        ttl=60,
    )
    assert work(ref) == 1


@pytest.mark.parametrize("store", store_params("redis", "cache"))
def test_wait_returns_the_running_calls_result(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A duplicate that finds the call running waits for it (``wait=``) and returns its result;
    the first call finishes only once the duplicate is known to be waiting."""
    calls = Counter()
    started, waiting = threading.Event(), threading.Event()
    next_pause = Backoff.next_pause

    def noted_pause(self: Backoff) -> float | None:
        waiting.set()  # the duplicate found the first in progress and waits for it
        return next_pause(self)

    monkeypatch.setattr(Backoff, "next_pause", noted_pause)

    @idempotent_function(key="waited:{ref}", store=store, wait=30)
    def slow(ref: str) -> int:
        started.set()
        assert waiting.wait(30)
        return calls()

    ref = unique("ref")
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(slow(ref)))
    thread.start()
    assert started.wait(30)
    assert slow(ref) == 1
    thread.join(30)
    assert not thread.is_alive()
    assert results == [1]
    assert calls.count == 1


# -- 20 threads, one key ---------------------------------------------------------------


class SideEffects:
    """A plain table the bodies insert into (committed, outside Django's flush)."""

    def __init__(self, table: str) -> None:
        self.table = table

    def insert(self, ref: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {self.table} (ref) VALUES (%s)", [ref])

    def count(self, ref: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {self.table} WHERE ref = %s", [ref])
            return int(cursor.fetchone()[0])


@pytest.fixture
def side_effects() -> Iterator[SideEffects]:
    table = f"beyond_effect_{unique('t').split('-')[1]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table} (id serial PRIMARY KEY, ref text NOT NULL)")
    yield SideEffects(table)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")


def _check_outcomes(results: list[Any], expected: dict[str, Any], *, wait: float) -> None:
    errors = [
        r for r in results if isinstance(r, BaseException) and not isinstance(r, CallInProgress)
    ]
    assert not errors, errors
    answered = [r for r in results if r == expected]
    in_progress = [r for r in results if isinstance(r, CallInProgress)]
    assert len(answered) + len(in_progress) == len(results)
    assert answered, "the owner returns its result"
    if wait:
        assert not in_progress


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("wait", [0.0, 10.0], ids=["no-wait", "wait"])
def test_twenty_threads_on_postgres_database_store_run_the_body_once(
    side_effects: SideEffects, wait: float
) -> None:
    ref = unique("order")

    overlap = Overlap(20)

    @idempotent_function(key="charge:{ref}", store=store_of(DB_STORE), wait=wait)
    def charge(ref: str) -> dict[str, Any]:
        side_effects.insert(ref)
        overlap.hold()  # still running while the others claim
        return {"charged": ref}

    results = run_threads(20, lambda _i: overlap.call(charge, ref))
    _check_outcomes(results, {"charged": ref}, wait=wait)
    assert side_effects.count(ref) == 1
    stored = IdempotencyRecord.objects.get(scope="functions", key=f"charge:{ref}")
    assert stored.is_completed and stored.method == "FUNCTION"


@pytest.mark.redis
@pytest.mark.parametrize("wait", [0.0, 10.0], ids=["no-wait", "wait"])
def test_twenty_threads_on_redis_store_run_the_body_once(redis_client: Any, wait: float) -> None:
    ref = unique("order")
    counter = f"beyond:effects:{ref}"

    overlap = Overlap(20)

    @idempotent_function(key="charge:{ref}", store=store_of(REDIS_STORE), wait=wait)
    def charge(ref: str) -> dict[str, Any]:
        redis_client.incr(counter)
        overlap.hold()  # still running while the others claim
        return {"charged": ref}

    results = run_threads(20, lambda _i: overlap.call(charge, ref))
    _check_outcomes(results, {"charged": ref}, wait=wait)
    assert int(redis_client.get(counter)) == 1


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
def test_atomic_mode_twenty_threads_all_get_the_one_result(side_effects: SideEffects) -> None:
    """Atomic mode: duplicates wait on the record's unique index and return the committed
    result; none sees CallInProgress, and the body's write happens once."""
    ref = unique("order")

    overlap = Overlap(20)

    @idempotent_function(key="charge:{ref}", store=store_of(DB_STORE), mode="atomic")
    def charge(ref: str) -> dict[str, Any]:
        side_effects.insert(ref)
        overlap.hold()  # still running while the others claim
        return {"charged": ref}

    results = run_threads(20, lambda _i: overlap.call(charge, ref))
    assert results == [{"charged": ref}] * 20
    assert side_effects.count(ref) == 1


@pytest.mark.django_db(transaction=True)
def test_atomic_mode_failure_rolls_back_the_claim_and_the_writes(side_effects: SideEffects) -> None:
    ref = unique("order")
    fail = {"now": True}

    @idempotent_function(key="charge:{ref}", store=store_of(DB_STORE), mode="atomic")
    def charge(ref: str) -> str:
        side_effects.insert(ref)
        if fail["now"]:
            raise RuntimeError("gateway down")
        return ref

    with pytest.raises(RuntimeError):
        charge(ref)
    assert side_effects.count(ref) == 0
    assert not IdempotencyRecord.objects.filter(key=f"charge:{ref}").exists()
    fail["now"] = False
    assert charge(ref) == charge(ref) == ref
