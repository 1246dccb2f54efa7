"""@idempotent_function over every store: replay, release, mismatch, async, concurrency."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.utils.module_loading import import_string

from idempotency import idempotent_function
from idempotency.calls import FunctionKeyMismatch, fingerprint_of, qualified_name
from idempotency.exceptions import IdempotencyKeyMismatch, InProgress
from idempotency.models import IdempotencyRecord
from idempotency.stores import get_store
from tests.support.counting import unique
from tests.support.stores import DB_STORE, REDIS_STORE, store_params
from tests.support.storms import run_threads

pytestmark = pytest.mark.django_db

ALL_STORES = store_params("db", "redis", "cache")


class Calls:
    """Counts executions of a body (thread-safe)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def add(self) -> int:
        with self._lock:
            self.count += 1
            return self.count


@pytest.mark.parametrize("store", ALL_STORES)
@pytest.mark.parametrize("value", [0, False, {}, [], None, "", 0.0], ids=repr)
def test_falsy_results_are_replayed(store: str, value: Any) -> None:
    calls = Calls()

    @idempotent_function(key="falsy:{ref}", store=store)
    def handle(ref: str) -> Any:
        calls.add()
        return value

    ref = unique("ref")
    first = handle(ref)
    second = handle(ref)
    assert calls.count == 1
    assert first == second == value
    assert type(first) is type(value) and type(second) is type(value)


@pytest.mark.parametrize("store", ALL_STORES)
def test_payment_callback_runs_once_per_trade_no(store: str) -> None:
    calls = Calls()

    @idempotent_function(key="pay_callback:{trade_no}", store=store)
    def on_callback(trade_no: str, amount: str, currency: str = "EUR") -> dict[str, Any]:
        calls.add()
        return {"trade_no": trade_no, "paid": amount, "currency": currency, "n": calls.count}

    trade = unique("T")
    first = on_callback(trade, "10.00")
    again = on_callback(trade_no=trade, amount="10.00")
    other = on_callback(unique("T"), "5.00")
    assert first == again == {"trade_no": trade, "paid": "10.00", "currency": "EUR", "n": 1}
    assert other["n"] == 2
    assert calls.count == 2
    assert on_callback.key_for(trade, "10.00") == f"pay_callback:{trade}"


@pytest.mark.parametrize("store", ALL_STORES)
def test_exception_releases_the_key(store: str) -> None:
    calls = Calls()

    @idempotent_function(key="flaky:{ref}", store=store)
    def flaky(ref: str) -> str:
        if calls.add() == 1:
            raise ConnectionError("gateway timeout")
        return "done"

    ref = unique("ref")
    with pytest.raises(ConnectionError):
        flaky(ref)
    assert get_store(store).lookup("functions", f"flaky:{ref}", fingerprint="x") is None
    assert flaky(ref) == "done"
    assert flaky(ref) == "done"
    assert calls.count == 2


@pytest.mark.parametrize("store", ALL_STORES)
def test_same_key_used_by_two_functions_is_a_mismatch(store: str) -> None:
    @idempotent_function(key="order:{order_id}", store=store)
    def pay(order_id: int) -> str:
        return "paid"

    @idempotent_function(key="order:{order_id}", store=store)
    def refund(order_id: int) -> str:
        raise AssertionError("must not run under pay's key")

    assert pay(7) == "paid"
    with pytest.raises(FunctionKeyMismatch) as caught:
        refund(7)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, IdempotencyKeyMismatch)
    assert "order:7" in str(caught.value) and "refund" in str(caught.value)
    # another scope keeps them apart
    other_scope = idempotent_function(key="order:{order_id}", scope="refunds", store=store)(
        lambda order_id: "refunded"
    )
    assert other_scope(7) == "refunded"


@pytest.mark.parametrize("store", ALL_STORES)
def test_forget_lets_it_run_again(store: str) -> None:
    calls = Calls()

    @idempotent_function(key=lambda job, day: f"report:{job}:{day}", store=store)
    def report(job: str, day: str) -> int:
        return calls.add()

    job = unique("job")
    assert report(job, "2024-01-01") == 1
    assert report(job, "2024-01-01") == 1
    assert report.key_for(job, "2024-01-01") == f"report:{job}:2024-01-01"
    assert report.forget(job, "2024-01-01") is True
    assert report(job, "2024-01-01") == 2
    assert report.forget(job, "1999-01-01") is False


@pytest.mark.parametrize("store", ALL_STORES)
def test_result_must_be_json_and_nothing_is_stored_otherwise(store: str) -> None:
    calls = Calls()

    @idempotent_function(key="obj:{ref}", store=store)
    def make(ref: str) -> Any:
        calls.add()
        return object()

    ref = unique("ref")
    with pytest.raises(TypeError, match="cannot be stored"):
        make(ref)
    with pytest.raises(TypeError):
        make(ref)
    assert calls.count == 2  # released each time, never stored
    assert get_store(store).lookup("functions", f"obj:{ref}", fingerprint="x") is None


def test_first_call_returns_what_repeats_return() -> None:
    @idempotent_function(key="shape:{ref}", store=DB_STORE)
    def shape(ref: str) -> Any:
        return {"pair": (1, 2), 3: "three"}

    ref = unique("ref")
    first, again = shape(ref), shape(ref)
    assert first == again == {"pair": (1, 2), 3: "three"}  # typed results keep both
    assert type(first["pair"]) is type(again["pair"]) is tuple


@pytest.mark.parametrize("store", ALL_STORES)
def test_async_function(store: str) -> None:
    calls = Calls()

    @idempotent_function(key="async:{ref}", store=store)
    async def handle(ref: str, fail: bool = False) -> dict[str, int]:
        count = calls.add()
        if fail:
            raise RuntimeError("boom")
        return {"count": count}

    ref = unique("ref")
    run = async_to_sync(handle)
    with pytest.raises(RuntimeError):
        run(ref, fail=True)
    assert run(ref) == {"count": 2}
    assert run(ref) == {"count": 2}
    assert calls.count == 2
    assert async_to_sync(handle.aforget)(ref) is True
    assert run(ref) == {"count": 3}


def test_key_validation() -> None:
    with pytest.raises(ValueError, match="missing"):

        @idempotent_function(key="pay:{missing}")
        def pay(order_id: int) -> None: ...

    with pytest.raises(ValueError, match="named fields"):

        @idempotent_function(key="pay:{0}")
        def pay2(order_id: int) -> None: ...

    @idempotent_function(key=lambda text: text, store=DB_STORE)
    def echo(text: str) -> str:
        return text

    with pytest.raises(ValueError, match="at most 255"):
        echo("x" * 256)
    with pytest.raises(ValueError, match="empty"):
        echo("")

    @idempotent_function(key="item:{item.pk}:{kwargs[tag]}", store=DB_STORE)
    def attrs(item: Any, **kwargs: Any) -> str:
        return "ok"

    class Item:
        pk = 5

    assert attrs.key_for(Item(), tag="x") == "item:5:x"

    @idempotent_function(key="flat:{tag}", store=DB_STORE)
    def flat(**kwargs: Any) -> str:
        return "ok"

    assert flat.key_for(tag="y") == "flat:y"


@pytest.mark.parametrize("store", ALL_STORES)
def test_nested_call_of_a_running_key_raises_in_progress(store: str) -> None:
    @idempotent_function(key="nested:{ref}", store=store, wait=0, fingerprint=["ref"])
    def outer(ref: str, depth: int = 0) -> str:
        if depth == 0:
            with pytest.raises(InProgress) as caught:
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
    calls = Calls()
    release_first = threading.Event()

    class WithoutKeepAlive(import_string(store)):  # type: ignore[misc]
        def extend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
            raise NotImplementedError

    @idempotent_function(key="slow:{ref}", store=WithoutKeepAlive(), lease=0.3)
    def slow(ref: str) -> dict[str, int]:
        count = calls.add()
        if count == 1:
            release_first.wait(10)
        return {"run": count}

    ref = unique("ref")
    first: list[Any] = []
    thread = threading.Thread(target=lambda: first.append(slow(ref)))
    thread.start()
    time.sleep(0.5)  # the first call's lease has run out
    assert slow(ref) == {"run": 2}  # taken over
    release_first.set()
    thread.join(10)
    assert first == [{"run": 1}]
    assert any("was refused" in r.getMessage() for r in caplog.records)
    assert slow(ref) == {"run": 2}  # the new owner's result stands
    assert calls.count == 2


def test_stale_owner_takeover_with_the_database_store() -> None:
    """Same contract through a claim made directly on the store (one connection)."""
    calls = Calls()

    @idempotent_function(key="db-slow:{ref}", store=DB_STORE)
    def work(ref: str) -> int:
        return calls.add()

    ref = unique("ref")
    store = get_store(DB_STORE)
    fingerprint = fingerprint_of("function", qualified_name(work.__wrapped__))
    dead = store.claim("functions", f"db-slow:{ref}", fingerprint=fingerprint, lease=0.05, ttl=60)
    assert dead.owned
    with pytest.raises(InProgress):
        idempotent_function(key="db-slow:{ref}", store=DB_STORE, lease=60)(work.__wrapped__)(ref)
    time.sleep(0.1)
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
def test_wait_returns_the_running_calls_result(store: str) -> None:
    calls = Calls()
    started = threading.Event()

    @idempotent_function(key="waited:{ref}", store=store, wait=5)
    def slow(ref: str) -> int:
        started.set()
        time.sleep(0.3)
        return calls.add()

    ref = unique("ref")
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(slow(ref)))
    thread.start()
    started.wait(5)
    assert slow(ref) == 1
    thread.join(5)
    assert results == [1]
    assert calls.count == 1


# -- 20 threads, one key ---------------------------------------------------------------


@pytest.fixture
def side_effects() -> Iterator[str]:
    """A plain table the bodies insert into (committed, outside Django's flush)."""
    table = f"beyond_effect_{unique('t').split('-')[1]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table} (id serial PRIMARY KEY, ref text NOT NULL)")
    yield table
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")


def _check_outcomes(results: list[Any], expected: dict[str, Any], *, wait: float) -> None:
    errors = [r for r in results if isinstance(r, BaseException) and not isinstance(r, InProgress)]
    assert not errors, errors
    answered = [r for r in results if r == expected]
    in_progress = [r for r in results if isinstance(r, InProgress)]
    assert len(answered) + len(in_progress) == len(results)
    assert answered, "the owner returns its result"
    if wait:
        assert not in_progress


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("wait", [0.0, 10.0], ids=["no-wait", "wait"])
def test_twenty_threads_on_postgres_database_store_run_the_body_once(
    side_effects: str, wait: float
) -> None:
    ref = unique("order")

    @idempotent_function(key="charge:{ref}", store=DB_STORE, wait=wait)
    def charge(ref: str) -> dict[str, Any]:
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {side_effects} (ref) VALUES (%s)", [ref])
        time.sleep(0.3)
        return {"charged": ref}

    results = run_threads(20, lambda _i: charge(ref))
    _check_outcomes(results, {"charged": ref}, wait=wait)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {side_effects} WHERE ref = %s", [ref])
        assert cursor.fetchone()[0] == 1
    stored = IdempotencyRecord.objects.get(scope="functions", key=f"charge:{ref}")
    assert stored.is_completed and stored.method == "FUNCTION"


@pytest.mark.redis
@pytest.mark.parametrize("wait", [0.0, 10.0], ids=["no-wait", "wait"])
def test_twenty_threads_on_redis_store_run_the_body_once(redis_client: Any, wait: float) -> None:
    ref = unique("order")
    counter = f"beyond:effects:{ref}"

    @idempotent_function(key="charge:{ref}", store=REDIS_STORE, wait=wait)
    def charge(ref: str) -> dict[str, Any]:
        redis_client.incr(counter)
        time.sleep(0.3)
        return {"charged": ref}

    results = run_threads(20, lambda _i: charge(ref))
    _check_outcomes(results, {"charged": ref}, wait=wait)
    assert int(redis_client.get(counter)) == 1


def test_signals_are_sent() -> None:
    from idempotency import signals

    seen: list[tuple[str, str]] = []

    def receiver(name: str) -> Any:
        def receive(sender: Any, key: str, request: Any = None, **kwargs: Any) -> None:
            assert request is None
            seen.append((name, key))

        return receive

    receivers = {name: receiver(name) for name in ("replayed", "conflict", "mismatch", "released")}
    for name, function in receivers.items():
        getattr(signals, name).connect(function)
    try:

        @idempotent_function(key="sig:{ref}", store=DB_STORE)
        def work(ref: str, fail: bool = False) -> str:
            if fail:
                raise RuntimeError
            with pytest.raises(InProgress):
                work(ref)
            return "ok"

        @idempotent_function(key="sig:{ref}", store=DB_STORE)
        def other(ref: str) -> str:
            return "other"

        with pytest.raises(RuntimeError):
            work("a", fail=True)
        work("a")
        work("a")
        with pytest.raises(FunctionKeyMismatch):
            other("a")
    finally:
        for name, function in receivers.items():
            getattr(signals, name).disconnect(function)
    assert seen == [
        ("released", "sig:a"),
        ("conflict", "sig:a"),
        ("replayed", "sig:a"),
        ("mismatch", "sig:a"),
    ]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_atomic_mode_twenty_threads_all_get_the_one_result(side_effects: str) -> None:
    """Atomic mode: duplicates wait on the record's unique index and return the committed
    result; none sees InProgress, and the body's write happens once."""
    ref = unique("order")

    @idempotent_function(key="charge:{ref}", store=DB_STORE, mode="atomic")
    def charge(ref: str) -> dict[str, Any]:
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {side_effects} (ref) VALUES (%s)", [ref])
        time.sleep(0.3)
        return {"charged": ref}

    results = run_threads(20, lambda _i: charge(ref))
    assert results == [{"charged": ref}] * 20
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {side_effects} WHERE ref = %s", [ref])
        assert cursor.fetchone()[0] == 1


@pytest.mark.django_db(transaction=True)
def test_atomic_mode_failure_rolls_back_the_claim_and_the_writes(side_effects: str) -> None:
    ref = unique("order")
    fail = {"now": True}

    @idempotent_function(key="charge:{ref}", store=DB_STORE, mode="atomic")
    def charge(ref: str) -> str:
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {side_effects} (ref) VALUES (%s)", [ref])
        if fail["now"]:
            raise RuntimeError("gateway down")
        return ref

    with pytest.raises(RuntimeError):
        charge(ref)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {side_effects} WHERE ref = %s", [ref])
        assert cursor.fetchone()[0] == 0
    assert not IdempotencyRecord.objects.filter(key=f"charge:{ref}").exists()
    fail["now"] = False
    assert charge(ref) == charge(ref) == ref


def test_atomic_mode_needs_a_store_that_supports_it() -> None:
    from django.core.exceptions import ImproperlyConfigured

    from idempotency.exceptions import ImproperlyApplied

    @idempotent_function(key="k:{ref}", store="idempotency.stores.CacheStore", mode="atomic")
    def work(ref: str) -> str:
        return ref

    with pytest.raises(ImproperlyConfigured):
        work("x")
    with pytest.raises(ValueError, match="mode"):
        idempotent_function(key="k", mode="sometimes")
    with pytest.raises(ImproperlyApplied):

        @idempotent_function(key="k", mode="atomic")
        async def later() -> None: ...
