"""Keys and arguments of idempotent functions and tasks, on every store (issue 19).

Missing key parts never become a shared key (defect 1); the same key with other
arguments is refused like HTTP's 422 (``ArgumentsMismatch``); ``payload_key`` makes
order-independent keys; ``ENABLED: False`` runs bodies directly. Executions are
counted in memory, which no rollback undoes.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.test import override_settings

from idempotency import KeyMismatch, KeyPartMissing, idempotent_function, payload_key
from idempotency.contrib.celery import idempotent_task
from idempotency.exceptions import ArgumentsMismatch, CallableMismatch
from idempotency.functions.arguments import fingerprint_of, qualified_name
from idempotency.stores.base import StoredResponse, get_store
from tests.support.counting import Counter, unique
from tests.support.stores import ALL_STORES, DB_STORE, store_of, using
from tests.support.storms import Overlap, run_threads
from tests.support.tasks import inprocess_app

pytestmark = pytest.mark.django_db


app = inprocess_app("beyond-keys")


# -- defect 1: a missing key part is an error, never a shared key ----------------------


@pytest.mark.parametrize("store", ALL_STORES)
@pytest.mark.parametrize("missing", [None, "", "  ", [], {}, [None, None], ()], ids=repr)
def test_a_missing_key_part_raises_and_runs_nothing(store: str, missing: Any) -> None:
    runs = Counter()

    @idempotent_function(key="pay_callback:{trade_no}", store=store)
    def callback(trade_no: Any, amount: str) -> int:
        return runs()

    for _ in range(2):
        with pytest.raises(KeyPartMissing, match="trade_no") as caught:
            callback(missing, "10.00")
        assert isinstance(caught.value, ValueError)
    assert runs.count == 0
    assert get_store(store).lookup("functions", f"pay_callback:{missing}", fingerprint="") is None


@pytest.mark.parametrize("store", ALL_STORES)
@pytest.mark.parametrize("value", [0, False, 0.0], ids=repr)
def test_falsy_values_that_are_values_make_keys(store: str, value: Any) -> None:
    runs = Counter()

    @idempotent_function(key="n:{ref}:{number}", store=store)
    def work(ref: str, number: Any) -> int:
        return runs()

    ref = unique("ref")
    assert work(ref, value) == work(ref, value) == 1
    assert work.key_for(ref, value) == f"n:{ref}:{value}"


@pytest.mark.parametrize("store", ALL_STORES)
def test_a_callable_key_returning_nothing_raises(store: str) -> None:
    runs = Counter()

    @idempotent_function(key=lambda event: event.get("id"), store=store)
    def handle(event: dict[str, Any]) -> int:
        return runs()

    for event in ({}, {"id": None}, {"id": ""}):
        with pytest.raises(KeyPartMissing):
            handle(event)
    assert runs.count == 0


@pytest.mark.parametrize("store", ALL_STORES)
def test_optional_runs_without_idempotency_and_warns(
    store: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="idempotency")
    runs = Counter()

    @idempotent_function(key="opt:{order.order_id}:{ref}", store=store, optional=True)
    def ship(order: Any, ref: str = unique("ref")) -> int:
        return runs()

    assert ship(None) == 1
    assert ship(None) == 2  # every call runs: there is no key to deduplicate on
    assert "without idempotency" in caplog.text

    order = Refund(order_id=1, amount=Decimal(1))
    assert ship(order) == ship(order) == 3  # with a key, idempotent as ever


def test_a_task_with_a_missing_key_part_fails_and_an_optional_one_runs() -> None:
    runs = Counter()

    @idempotent_task(app=app, name="keys.strict", key="msg_{message_id}")
    def strict(message_id: Any) -> int:
        return runs()

    @idempotent_task(app=app, name="keys.optional", key="msg_{message_id}", optional=True)
    def lenient(message_id: Any) -> int:
        return runs()

    with override_settings(IDEMPOTENCY={**using(DB_STORE)}):
        with pytest.raises(KeyPartMissing):
            strict.apply((None,), throw=True)
        assert runs.count == 0
        assert lenient.apply((None,)).get() == 1
        assert lenient.apply((None,)).get() == 2


# -- payload_key -------------------------------------------------------------------------


@pytest.mark.parametrize("store", ALL_STORES)
def test_payload_key_ignores_mapping_order_and_stays_short(store: str) -> None:
    runs = Counter()

    @idempotent_function(key=payload_key("event", prefix="evt:"), store=store)
    def on_event(event: dict[str, Any]) -> int:
        return runs()

    nonce = unique("n")
    big = {"id": nonce, "items": [{"sku": f"s{i}", "qty": i} for i in range(100)], "total": 5}
    reordered = {"total": 5, "items": big["items"], "id": nonce}
    assert on_event(big) == on_event(reordered) == 1
    key = on_event.key_for(big)
    assert key.startswith("evt:") and len(key) == 4 + 64
    assert on_event({**big, "total": 6}) == 2  # another payload, another key


# -- key templates: structured parts are canonical, whatever their order ----------------


@pytest.mark.parametrize("store", ALL_STORES)
def test_a_dict_in_a_key_template_gives_one_key_in_any_order(store: str) -> None:
    runs = Counter()

    @idempotent_function(key="sort:{payload}", store=store)
    def sort(payload: dict[str, Any]) -> int:
        return runs()

    nonce = unique("n")
    first = {"id": nonce, "lines": [{"sku": "a", "qty": 1}], "tags": {"x", "y"}}
    second = {"tags": {"y", "x"}, "lines": [{"qty": 1, "sku": "a"}], "id": nonce}
    assert sort.key_for(first) == sort.key_for(second)
    assert sort(first) == sort(second) == 1
    assert sort({**first, "id": unique("n")}) == 2  # another payload, another key
    assert sort.key_for({"b": 1, "a": 2}) == 'sort:{"$map":[["a",2],["b",1]]}'


@pytest.mark.parametrize("store", ALL_STORES)
def test_scalar_parts_keep_their_keys(store: str) -> None:
    @idempotent_function(key="pay:{ref}:{amount:.2f}:{when}", store=store)
    def pay(ref: str, amount: Decimal, when: Any) -> None:
        return None

    when = uuid.UUID(int=5)
    assert pay.key_for("r", Decimal("10.5"), when) == f"pay:r:10.50:{when}"


class Opaque:
    """No __str__ of its own: its text would be a repr with a memory address."""


@pytest.mark.parametrize("store", ALL_STORES)
def test_a_part_with_no_canonical_text_is_refused_by_name(store: str) -> None:
    runs = Counter()

    @idempotent_function(key="x:{thing}", store=store)
    def use(thing: Any) -> int:
        return runs()

    for thing in (Opaque(), [Opaque()]):
        with pytest.raises(TypeError, match=r"'x:\{thing\}' of .*key part \{thing\} is a"):
            use(thing)
    assert runs.count == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_reordered_dicts_from_ten_threads_run_once_on_postgres() -> None:
    runs = Counter()

    @idempotent_function(key="sort:{payload}", store=store_of(DB_STORE), wait=30)
    def sort(payload: dict[str, Any]) -> int:
        count = runs()
        overlap.hold()  # still running while the others claim
        return count

    nonce = unique("n")
    items = [("id", nonce), ("a", 1), ("b", [1, 2]), ("c", {"d": 1, "e": 2})]

    overlap = Overlap(10)

    def call(index: int) -> int:
        overlap.enter()
        rotated = items[index % len(items) :] + items[: index % len(items)]
        payload = dict(rotated)
        if index % 2:
            payload["c"] = {"e": 2, "d": 1}
        return sort(payload)

    results = run_threads(10, call)
    assert results == [1] * 10
    assert runs.count == 1


def test_payload_key_paths_hash_only_those_parts() -> None:
    @idempotent_function(
        key=payload_key("event", "detail.id", "items.0.sku"),
        store=store_of(DB_STORE),
        fingerprint=False,
    )
    def on_event(event: dict[str, Any]) -> str:
        return "ok"

    a = {"detail": {"id": 7, "at": "10:00"}, "items": [{"sku": "x"}]}
    b = {"detail": {"at": "10:05", "id": 7}, "items": [{"sku": "x"}, {"sku": "y"}]}
    assert on_event.key_for(a) == on_event.key_for(b)
    assert on_event.key_for(a) != on_event.key_for({**a, "detail": {"id": 8}})
    with pytest.raises(KeyPartMissing, match="detail.id"):
        on_event({"detail": {}, "items": [{"sku": "x"}]})
    with pytest.raises(ValueError, match="payload"):
        idempotent_function(key=payload_key("payload"))(lambda event: None)


# -- arguments are part of the contract --------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Refund:
    order_id: int
    amount: Decimal


@pytest.mark.parametrize("store", ALL_STORES)
def test_the_same_key_with_other_arguments_is_refused(store: str) -> None:
    runs = Counter()

    @idempotent_function(key="charge:{trade_no}", store=store)
    def charge(trade_no: str, amount: Decimal, meta: dict[str, Any] | None = None) -> int:
        return runs()

    trade = unique("T")
    assert charge(trade, Decimal("10.00"), {"a": 1, "b": 2}) == 1
    # the same call: Decimal by value, mapping keys in any order
    assert charge(trade, Decimal("10.0"), {"b": 2, "a": 1}) == 1
    assert charge(trade_no=trade, amount=Decimal("10"), meta={"a": 1, "b": 2}) == 1
    with pytest.raises(ArgumentsMismatch) as caught:
        charge(trade, Decimal("10.01"), {"a": 1, "b": 2})
    assert isinstance(caught.value, KeyMismatch)
    assert isinstance(caught.value, ValueError)
    assert not isinstance(caught.value, CallableMismatch)
    # named by its keyed hash in the message (which ends up in logs), raw in .key
    assert caught.value.key == f"charge:{trade}" and trade not in str(caught.value)
    assert runs.count == 1


def test_a_call_binds_its_arguments_once_for_its_key_and_its_fingerprint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = Counter()

    @idempotent_function(key="bind:{trade_no}", store=store_of(DB_STORE))
    def charge(trade_no: str, amount: Decimal, **meta: Any) -> int:
        return runs()

    binds = Counter()
    bind = inspect.Signature.bind

    def counted(self: inspect.Signature, *args: Any, **kwargs: Any) -> inspect.BoundArguments:
        binds()
        return bind(self, *args, **kwargs)

    monkeypatch.setattr(inspect.Signature, "bind", counted)
    trade = unique("T")
    assert charge(trade, Decimal("1"), tag="a") == charge(trade, amount=Decimal("1.0"), tag="a")
    assert binds.count == 2  # one per call: the key and the fingerprint share it
    with pytest.raises(ArgumentsMismatch):  # the shared binding still tells them apart
        charge(trade, Decimal("1"), tag="b")
    assert runs.count == 1


@pytest.mark.parametrize("store", ALL_STORES)
def test_fingerprint_narrows_or_turns_the_check_off(store: str) -> None:
    runs = Counter()

    @idempotent_function(key="r:{ref}", store=store, fingerprint=["refund"])
    def by_name(ref: str, refund: Refund, note: str = "") -> int:
        return runs()

    @idempotent_function(key="c:{ref}", store=store, fingerprint=lambda ref, refund: refund.amount)
    def by_callable(ref: str, refund: Refund) -> int:
        return runs()

    @idempotent_function(key="o:{ref}", store=store, fingerprint=False)
    def off(ref: str, refund: Refund) -> int:
        return runs()

    ref = unique("ref")
    refund = Refund(1, Decimal("5.00"))
    assert by_name(ref, refund, "first") == by_name(ref, Refund(1, Decimal("5")), "retry") == 1
    with pytest.raises(ArgumentsMismatch):
        by_name(ref, Refund(2, Decimal("5.00")))  # dataclasses by value
    assert by_callable(ref, refund) == by_callable(ref, Refund(9, Decimal("5"))) == 2
    with pytest.raises(ArgumentsMismatch):
        by_callable(ref, Refund(1, Decimal("6")))
    assert off(ref, refund) == off(ref, Refund(3, Decimal("1"))) == 3
    with pytest.raises(ValueError, match="nope"):
        idempotent_function(key="k", fingerprint=["nope"])(lambda ref: None)


def test_model_instances_are_fingerprinted_by_label_and_primary_key() -> None:
    from tests.testapp.models import Effect

    runs = Counter()

    @idempotent_function(key="effect:{effect.pk}", store=store_of(DB_STORE))
    def settle(effect: Effect) -> int:
        return runs()

    effect = Effect.objects.create(label="a", amount=1)
    assert settle(effect) == 1
    Effect.objects.filter(pk=effect.pk).update(amount=2)  # its fields move on
    effect.refresh_from_db()
    assert settle(effect) == 1


def test_arguments_that_cannot_be_hashed_fail_clearly() -> None:
    @idempotent_function(key="obj:{ref}", store=store_of(DB_STORE))
    def work(ref: str, thing: object) -> str:
        return "ran"

    with pytest.raises(TypeError, match="fingerprint"):
        work(unique("ref"), object())


@pytest.mark.parametrize("store", ALL_STORES)
def test_records_stored_before_argument_fingerprints_keep_working(store: str) -> None:
    """A record written by the previous version (fingerprint: the function's name hash,
    a plain JSON body) is still this function's: replayed, never a mismatch."""
    runs = Counter()

    def pay(trade_no: str, amount: str) -> dict[str, str]:
        runs()
        return {"paid": amount}

    ref = unique("T")
    backend = get_store(store)
    old = backend.claim(
        "functions",
        f"pay:{ref}",
        fingerprint=fingerprint_of("function", qualified_name(pay)),
        lease=60,
        ttl=60,
    )
    body = StoredResponse(200, [("Content-Type", "application/json")], b'{"paid":"1.00"}')
    assert backend.complete("functions", f"pay:{ref}", fence=old.fence, response=body, ttl=60)
    wrapped = idempotent_function(key="pay:{trade_no}", store=store)(pay)
    assert wrapped(ref, "1.00") == {"paid": "1.00"}
    assert wrapped(ref, "2.00") == {"paid": "1.00"}  # its arguments were never recorded
    assert runs.count == 0


def test_a_task_redelivered_with_other_arguments_fails_without_retrying() -> None:
    runs = Counter()

    @idempotent_task(
        app=app,
        name="keys.consume",
        key="msg_{message_id}",
        autoretry_for=(Exception,),
        retry_kwargs={"countdown": 0},
        max_retries=3,
    )
    def consume(message_id: str, amount: str) -> int:
        return runs()

    @idempotent_task(app=app, name="keys.other", key="msg_{message_id}")
    def other(message_id: str, amount: str) -> int:
        return runs()

    message = uuid.uuid4().hex
    with override_settings(IDEMPOTENCY={**using(DB_STORE)}):
        assert consume.apply((message, "1.00")).get() == 1
        assert consume.apply((message, "1.00")).get() == 1
        tampered = consume.apply((message, "9.99"))
        assert tampered.state == "FAILURE"  # not RETRY: a redelivery would fail the same
        assert isinstance(tampered.result, ArgumentsMismatch)
        with pytest.raises(CallableMismatch):
            other.apply((message, "1.00"), throw=True)
    assert runs.count == 1  # no run for the tampered message, and no retry of it


# -- ENABLED: False ----------------------------------------------------------------------


@pytest.mark.parametrize("store", ALL_STORES)
def test_disabled_runs_every_body_and_touches_no_store(store: str) -> None:
    runs = Counter()

    @idempotent_function(key="off:{ref}", store=store)
    def work(ref: Any) -> int:
        return runs()

    @idempotent_task(app=app, name=f"keys.disabled.{store}", key="off:{ref}", store=store)
    def task(ref: Any) -> int:
        return runs()

    ref = unique("ref")
    with override_settings(IDEMPOTENCY={"ENABLED": False, **using("no.such.Store")}):
        assert [work(ref), work(ref), work(None)] == [1, 2, 3]  # not even a key is built
        assert task.apply((ref,)).get() == 4
        assert task.apply((ref,), task_id="same").get() == 5
        assert task.apply((ref,), task_id="same").get() == 6
    assert get_store(store).lookup("functions", f"off:{ref}", fingerprint="") is None
    assert work(ref) == work(ref) == 7  # enabled again: idempotent
