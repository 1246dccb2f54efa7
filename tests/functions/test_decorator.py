"""@idempotent_function over every store: replay, release, mismatch, async, keys, signals
(concurrent calls, leases and waits: ``test_functions_concurrency.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync

from idempotency import idempotent_function
from idempotency.exceptions import CallableMismatch, CallInProgress, KeyMismatch
from idempotency.stores.base import get_store
from idempotency.utils.hashing import log_ref
from tests.support.counting import Counter, unique
from tests.support.stores import ALL_STORES, CACHE_STORE, DB_STORE, store_of

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("store", ALL_STORES)
@pytest.mark.parametrize("value", [0, False, {}, [], None, "", 0.0], ids=repr)
def test_falsy_results_are_replayed(store: str, value: Any) -> None:
    calls = Counter()

    @idempotent_function(key="falsy:{ref}", store=store)
    def handle(ref: str) -> Any:
        calls()
        return value

    ref = unique("ref")
    first = handle(ref)
    second = handle(ref)
    assert calls.count == 1
    assert first == second == value
    assert type(first) is type(value) and type(second) is type(value)


@pytest.mark.parametrize("store", ALL_STORES)
def test_payment_callback_runs_once_per_trade_no(store: str) -> None:
    calls = Counter()

    @idempotent_function(key="pay_callback:{trade_no}", store=store)
    def on_callback(trade_no: str, amount: str, currency: str = "EUR") -> dict[str, Any]:
        calls()
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
    calls = Counter()

    @idempotent_function(key="flaky:{ref}", store=store)
    def flaky(ref: str) -> str:
        if calls() == 1:
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
    with pytest.raises(CallableMismatch) as caught:
        refund(7)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, KeyMismatch)
    # the message names the record by its keyed hash (it ends up in logs), never raw
    assert caught.value.key == "order:7" and "order:7" not in str(caught.value)
    assert log_ref("functions", "order:7") in str(caught.value) and "refund" in str(caught.value)
    # another scope keeps them apart
    other_scope = idempotent_function(key="order:{order_id}", scope="refunds", store=store)(
        lambda order_id: "refunded"
    )
    assert other_scope(7) == "refunded"


@pytest.mark.parametrize("store", ALL_STORES)
def test_forget_lets_it_run_again(store: str) -> None:
    calls = Counter()

    @idempotent_function(key=lambda job, day: f"report:{job}:{day}", store=store)
    def report(job: str, day: str) -> int:
        return calls()

    job = unique("job")
    assert report(job, "2024-01-01") == 1
    assert report(job, "2024-01-01") == 1
    assert report.key_for(job, "2024-01-01") == f"report:{job}:2024-01-01"
    assert report.forget(job, "2024-01-01") is True
    assert report(job, "2024-01-01") == 2
    assert report.forget(job, "1999-01-01") is False


@pytest.mark.parametrize("store", ALL_STORES)
def test_result_must_be_json_and_nothing_is_stored_otherwise(store: str) -> None:
    calls = Counter()

    @idempotent_function(key="obj:{ref}", store=store)
    def make(ref: str) -> Any:
        calls()
        return object()

    ref = unique("ref")
    with pytest.raises(TypeError, match="cannot be stored"):
        make(ref)
    with pytest.raises(TypeError):
        make(ref)
    assert calls.count == 2  # released each time, never stored
    assert get_store(store).lookup("functions", f"obj:{ref}", fingerprint="x") is None


def test_first_call_returns_what_repeats_return() -> None:
    @idempotent_function(key="shape:{ref}", store=store_of(DB_STORE))
    def shape(ref: str) -> Any:
        return {"pair": (1, 2), 3: "three"}

    ref = unique("ref")
    first, again = shape(ref), shape(ref)
    assert first == again == {"pair": (1, 2), 3: "three"}  # typed results keep both
    assert type(first["pair"]) is type(again["pair"]) is tuple


@pytest.mark.parametrize("store", ALL_STORES)
def test_async_function(store: str) -> None:
    calls = Counter()

    @idempotent_function(key="async:{ref}", store=store)
    async def handle(ref: str, fail: bool = False) -> dict[str, int]:
        count = calls()
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

    @idempotent_function(key=lambda text: text, store=store_of(DB_STORE))
    def echo(text: str) -> str:
        return text

    with pytest.raises(ValueError, match="at most 255"):
        echo("x" * 256)
    with pytest.raises(ValueError, match="empty"):
        echo("")

    @idempotent_function(key="item:{item.pk}:{kwargs[tag]}", store=store_of(DB_STORE))
    def attrs(item: Any, **kwargs: Any) -> str:
        return "ok"

    class Item:
        pk = 5

    assert attrs.key_for(Item(), tag="x") == "item:5:x"

    @idempotent_function(key="flat:{tag}", store=store_of(DB_STORE))
    def flat(**kwargs: Any) -> str:
        return "ok"

    assert flat.key_for(tag="y") == "flat:y"


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

        @idempotent_function(key="sig:{ref}", store=store_of(DB_STORE))
        def work(ref: str, fail: bool = False) -> str:
            if fail:
                raise RuntimeError
            with pytest.raises(CallInProgress):
                work(ref)
            return "ok"

        @idempotent_function(key="sig:{ref}", store=store_of(DB_STORE))
        def other(ref: str) -> str:
            return "other"

        with pytest.raises(RuntimeError):
            work("a", fail=True)
        work("a")
        work("a")
        with pytest.raises(CallableMismatch):
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


def test_atomic_mode_needs_a_store_that_supports_it() -> None:
    from django.core.exceptions import ImproperlyConfigured

    from idempotency.exceptions import ImproperlyApplied

    @idempotent_function(key="k:{ref}", store=store_of(CACHE_STORE), mode="atomic")
    def work(ref: str) -> str:
        return ref

    with pytest.raises(ImproperlyConfigured):
        work("x")
    with pytest.raises(ValueError, match="mode"):
        idempotent_function(key="k", mode="sometimes")
    with pytest.raises(ImproperlyApplied):

        @idempotent_function(key="k", mode="atomic")
        async def later() -> None: ...


# -- issue 36, finding 5: argument fingerprints are keyed ---------------------------------


def test_an_argument_fingerprint_is_keyed_and_an_unkeyed_record_still_replays() -> None:
    import hashlib

    from django.test import override_settings

    from idempotency.exceptions import ArgumentsMismatch
    from idempotency.functions.arguments import arguments_digest, fingerprint_of, qualified_name
    from idempotency.models import IdempotencyRecord
    from idempotency.stores.base import StoredResponse

    runs = Counter()

    def body(card: str, cvv: str) -> str:
        runs()
        return "charged"

    charge = idempotent_function(key="charge:{card}", store=store_of(DB_STORE))(body)
    card = unique("4111")
    assert charge(card, "737") == "charged"
    stored = IdempotencyRecord.objects.get(key=f"charge:{card}").fingerprint
    owner = fingerprint_of("function", qualified_name(body))[:32]
    unkeyed = hashlib.sha256(b'{"card":"%s","cvv":"737"}' % card.encode()).hexdigest()
    assert stored[:32] == owner and stored[32:] != unkeyed[:32]  # no oracle on the cvv
    assert stored[32:] != arguments_digest({"card": card, "cvv": "737"}).hex()[:32]

    # a record stored before the upgrade, unkeyed: still this call's own while accepted
    store = store_of(DB_STORE)
    for accept in (True, False):
        other = unique("4111")
        legacy = owner + arguments_digest({"card": other, "cvv": "123"}).hex()[:32]
        claim = store.claim("functions", f"charge:{other}", fingerprint=legacy, lease=30, ttl=60)
        done = StoredResponse(200, [("Content-Type", "application/json")], b'"before"')
        assert store.complete(
            "functions", f"charge:{other}", fence=claim.fence, response=done, ttl=60
        )
        with override_settings(IDEMPOTENCY={"FINGERPRINT_ACCEPT_UNKEYED": accept}):
            if accept:
                assert charge(other, "123") == "before"
            else:
                with pytest.raises(ArgumentsMismatch):
                    charge(other, "123")
    assert runs.count == 1
