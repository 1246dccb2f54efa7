"""What idempotent functions and tasks store, on every store (issue 19): typed results,
stored exceptions (``store_errors=True``, defect 2), replay hooks and signals, and
records the store cannot read (defect 3). Executions are counted in memory."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import pickle
import uuid
from decimal import Decimal
from typing import Any, Optional, Union

import pytest
from django.test import override_settings
from pydantic import BaseModel

from idempotency import idempotent_function, signals
from idempotency.contrib.celery import idempotent_task
from idempotency.core.job import ReplayedRecord
from idempotency.exceptions import StoreCorrupted, StoredError
from idempotency.utils.hashing import log_ref
from tests.support.counting import Counter, unique
from tests.support.stores import ALL_STORES, DB_STORE, store_of, using
from tests.support.tasks import inprocess_app

pytestmark = pytest.mark.django_db


app = inprocess_app("beyond-results")


class Currency(enum.Enum):
    EUR = "EUR"
    USD = "USD"


@dataclasses.dataclass(frozen=True)
class Receipt:
    amount: Decimal
    at: datetime.datetime
    currency: Currency
    lines: tuple[str, ...] = ()


class Payment(BaseModel):
    id: uuid.UUID
    amount: Decimal
    day: datetime.date


class Money:
    """Neither dataclass nor pydantic: to_dict() and a from_dict() classmethod."""

    def __init__(self, cents: int, currency: str) -> None:
        self.cents, self.currency = cents, currency

    def to_dict(self) -> dict[str, Any]:
        return {"cents": self.cents, "currency": self.currency}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Money:
        return cls(data["cents"], data["currency"])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and other.to_dict() == self.to_dict()


class Declined(Exception):
    def __init__(self, code: str, amount: Decimal) -> None:
        super().__init__(code, amount)
        self.code = code


class Unrebuildable(Exception):
    def __init__(self, *, reason: str) -> None:
        super().__init__(f"no: {reason}")


NOW = datetime.datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=datetime.UTC)
VALUES: list[Any] = [
    Decimal("10.10"),
    Decimal("1E+3"),
    NOW,
    NOW.date(),
    datetime.timedelta(days=1, seconds=5),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    b"\x00\xffraw",
    (1, "two", Decimal("3.3")),
    {1: "int key", "$odd": {2, 3}},
    {"__idem__": "looks like a tag", "n": frozenset({"a"})},
    Currency.USD,
    Receipt(Decimal("9.99"), NOW, Currency.EUR, ("a", "b")),
    Payment(id=uuid.UUID(int=7), amount=Decimal("12.50"), day=NOW.date()),
    Money(1050, "EUR"),
    {"nested": [Receipt(Decimal("0.01"), NOW, Currency.USD)], "total": Decimal("0.01")},
]


#: Each value's return annotation (the classes a replay may rebuild): its own type, or
#: for the mixed dict, the nested one.
def annotation_of(value: Any) -> Any:
    if isinstance(value, dict) and "nested" in value:
        return dict[str, list[Receipt] | Decimal]
    return type(value)


#: What a declared exception class is listed as (``RESULT_TYPES``).
DECLINED = {"RESULT_TYPES": ["tests.functions.test_results.Declined"]}


@pytest.mark.parametrize("store", ALL_STORES)
@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_results_keep_their_type_and_value(store: str, value: Any) -> None:
    runs = Counter()

    def body(ref: str) -> Any:
        runs()
        return value

    # as a module without ``from __future__ import annotations`` has it
    body.__annotations__ = {"ref": str, "return": annotation_of(value)}
    produce = idempotent_function(key="typed:{ref}", store=store)(body)

    ref = unique("ref")
    first, again = produce(ref), produce(ref)
    assert runs.count == 1
    assert first == again == value
    assert type(first) is type(again) is type(value)
    if isinstance(value, Decimal):
        assert str(again) == str(value)  # exact: "10.10" stays "10.10"


def test_a_task_result_keeps_its_type() -> None:
    @idempotent_task(app=app, name="results.receipt", key="receipt:{ref}")
    def receipt(ref: str) -> Receipt:
        return Receipt(Decimal("1.50"), NOW, Currency.EUR)

    ref = unique("ref")
    with override_settings(IDEMPOTENCY={**using(DB_STORE)}):
        assert receipt.apply((ref,)).get() == receipt.apply((ref,)).get() == receipt.run(ref)
        assert type(receipt.apply((ref,)).get().amount) is Decimal


def test_a_class_only_the_return_annotation_names_is_found_through_it() -> None:
    @dataclasses.dataclass
    class Local:
        amount: Decimal

    def produce(ref: str) -> Local:
        return Local(Decimal("2.00"))

    # as a module without ``from __future__ import annotations`` has it: the class itself
    produce.__annotations__ = {"ref": str, "return": Local}
    make = idempotent_function(key="local:{ref}", store=store_of(DB_STORE))(produce)

    ref = unique("ref")
    assert make(ref) == make(ref) == Local(Decimal("2.00"))

    @idempotent_function(key="unannotated:{ref}", store=store_of(DB_STORE))
    def hidden(ref: str):  # type: ignore[no-untyped-def]
        return Local(Decimal(1))

    with pytest.raises(TypeError, match="cannot be stored"):
        hidden(ref)  # it could not be found again on replay: refused before storing


def test_a_class_the_annotation_does_not_name_is_refused_before_storing() -> None:
    """Importable is not enough: only what the function declares is ever rebuilt."""
    runs = Counter()

    @idempotent_function(key="undeclared:{ref}", store=store_of(DB_STORE))
    def produce(ref: str) -> dict[str, Any]:
        runs()
        return {"receipt": Receipt(Decimal("1.00"), NOW, Currency.EUR)}

    ref = unique("ref")
    with pytest.raises(TypeError, match="not declared"):
        produce(ref)
    with override_settings(IDEMPOTENCY={"RESULT_TYPES": ["tests.functions.test_results.Receipt"]}):
        assert produce(ref) == produce(ref)
    assert runs.count == 2  # the refused call stored nothing


@pytest.mark.parametrize("store", ALL_STORES)
def test_a_serializer_stores_anything(store: str) -> None:
    runs = Counter()

    @idempotent_function(key="pickled:{ref}", store=store, serializer=pickle)
    def produce(ref: str) -> Any:
        runs()
        return {"set": {1, 2}, "complex": 1 + 2j}

    ref = unique("ref")
    assert produce(ref) == produce(ref) == {"set": {1, 2}, "complex": 1 + 2j}
    assert runs.count == 1


# -- store_errors=True: an exception is stored and raised again ---------------------------


@pytest.mark.parametrize("store", ALL_STORES)
@override_settings(IDEMPOTENCY=DECLINED)
def test_a_stored_exception_is_raised_again_without_running(store: str) -> None:
    runs = Counter()

    @idempotent_function(key="declined:{ref}", store=store, store_errors=True)
    def charge(ref: str) -> str:
        runs()
        raise Declined("card-declined", Decimal("10.00"))

    ref = unique("ref")
    raised = []
    for _ in range(3):
        with pytest.raises(Declined) as caught:
            charge(ref)
        raised.append(caught.value)
    assert runs.count == 1
    assert [str(e) for e in raised] == [str(raised[0])] * 3
    assert raised[2].code == "card-declined" and raised[2].args[1] == Decimal("10.00")


@pytest.mark.parametrize("store", ALL_STORES)
def test_an_undeclared_exception_comes_back_as_stored_error(store: str) -> None:
    """A builtin exception is rebuilt; one of a class nobody declared is never
    constructed from what the store holds: StoredError carries its name and message."""
    runs = Counter()

    @idempotent_function(key="undeclared-err:{ref}", store=store, store_errors=True)
    def charge(ref: str) -> str:
        runs()
        if ref.startswith("builtin"):
            raise LookupError("no such card")
        raise Declined("card-declined", Decimal("10.00"))

    for ref, first, again in (
        (unique("builtin"), LookupError, LookupError),
        (unique("declined"), Declined, StoredError),
    ):
        with pytest.raises(first):
            charge(ref)
        with pytest.raises(again) as caught:
            charge(ref)
    assert runs.count == 2
    assert caught.value.type_name == "tests.functions.test_results.Declined"  # type: ignore[attr-defined]


@pytest.mark.parametrize("store", ALL_STORES)
def test_an_exception_that_cannot_be_rebuilt_comes_back_as_stored_error(store: str) -> None:
    runs = Counter()

    @idempotent_function(key="odd:{ref}", store=store, store_errors=True)
    def work(ref: str) -> str:
        runs()
        raise Unrebuildable(reason="gateway")

    ref = unique("ref")
    with pytest.raises(Unrebuildable):
        work(ref)
    with pytest.raises(StoredError) as caught:
        work(ref)
    assert caught.value.type_name.endswith("test_results.Unrebuildable")
    assert caught.value.message == "no: gateway"
    assert runs.count == 1


@pytest.mark.django_db(transaction=True)
@override_settings(IDEMPOTENCY=DECLINED)
def test_atomic_mode_stores_the_exception_after_rolling_the_writes_back() -> None:
    from tests.testapp.models import Effect

    runs = Counter()

    @idempotent_function(
        key="atomic-err:{ref}", store=store_of(DB_STORE), mode="atomic", store_errors=True
    )
    def write(ref: str) -> None:
        runs()
        Effect.objects.create(label=ref)
        raise Declined("late", Decimal(0))

    ref = unique("ref")
    for _ in range(2):
        with pytest.raises(Declined):
            write(ref)
    assert runs.count == 1
    assert not Effect.objects.filter(label=ref).exists()


def test_a_task_with_store_errors_fails_the_same_way_on_redelivery() -> None:
    runs = Counter()

    @idempotent_task(app=app, name="results.failing", key="fail:{ref}", store_errors=True)
    def failing(ref: str) -> None:
        runs()
        raise Declined("nope", Decimal(1))

    ref = unique("ref")
    with override_settings(IDEMPOTENCY={**using(DB_STORE), **DECLINED}):
        for _ in range(2):
            with pytest.raises(Declined):
                failing.apply((ref,), throw=True)
    assert runs.count == 1


# -- replays are visible -----------------------------------------------------------------


@pytest.mark.parametrize("store", ALL_STORES)
def test_on_replay_sees_the_record_and_may_replace_the_result(store: str) -> None:
    seen: list[tuple[Any, ReplayedRecord]] = []
    signalled: list[dict[str, Any]] = []

    def on_replay(result: Any, record: ReplayedRecord) -> Any:
        seen.append((result, record))
        return {**result, "replayed": True}

    def receiver(sender: Any, **kwargs: Any) -> None:
        signalled.append(kwargs)

    @idempotent_function(key="seen:{ref}", store=store, ttl=600, on_replay=on_replay)
    def work(ref: str) -> dict[str, Any]:
        return {"ok": 1}

    ref = unique("ref")
    signals.replayed.connect(receiver)
    try:
        started = datetime.datetime.now(datetime.UTC)
        assert work(ref) == {"ok": 1}
        assert seen == [] and signalled == []
        assert work(ref) == {"ok": 1, "replayed": True}
    finally:
        signals.replayed.disconnect(receiver)
    [(result, record)] = seen
    assert result == {"ok": 1}
    assert (record.scope, record.key) == ("functions", f"seen:{ref}")
    assert record.expires_at is not None
    remaining = (record.expires_at - started).total_seconds()
    assert 590 < remaining <= 601
    assert signalled[0]["record"] == record and signalled[0]["expires_at"] == record.expires_at


# -- defect 3: what the store cannot read is the library's error -------------------------


@pytest.mark.redis
def test_a_foreign_value_under_a_redis_record_key_is_a_library_error(
    redis_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from idempotency.stores.redis import RedisStore

    runs = Counter()
    store = RedisStore()

    @idempotent_function(key="foreign:{ref}", store=store)
    def work(ref: str) -> int:
        return runs()

    ref = unique("ref")
    redis_client.set(store.record_key("functions", f"foreign:{ref}"), "not a record")
    with pytest.raises(StoreCorrupted):
        work(ref)
    for operation in (
        lambda: store.lookup("functions", f"foreign:{ref}", fingerprint="f"),
        lambda: store.complete(
            "functions", f"foreign:{ref}", fence=1, response=_response(), ttl=60
        ),
        lambda: store.release("functions", f"foreign:{ref}", fence=1),
    ):
        with pytest.raises(StoreCorrupted):
            operation()
    assert runs.count == 0
    assert log_ref("functions", f"foreign:{ref}") in caplog.text and "unreadable" in caplog.text
    assert ref not in caplog.text  # issue 36, finding 11: logs never carry the raw key
    # a damaged hash (a field that does not parse) too
    name = store.record_key("functions", f"damaged:{ref}")
    redis_client.hset(name, mapping={"state": "c", "fp": "x", "status": "two hundred"})
    with pytest.raises(StoreCorrupted):
        store.claim("functions", f"damaged:{ref}", fingerprint="x", lease=5, ttl=5)


def test_a_foreign_value_under_a_cache_record_key_is_a_library_error() -> None:
    from idempotency.stores.cache import CacheStore

    runs = Counter()
    store = CacheStore()

    @idempotent_function(key="foreign:{ref}", store=store)
    def work(ref: str) -> int:
        return runs()

    ref = unique("ref")
    store.cache.set(store.record_key("functions", f"foreign:{ref}"), "not a record")
    with pytest.raises(StoreCorrupted):
        work(ref)
    assert runs.count == 0


def _response() -> Any:
    from idempotency.stores.base import StoredResponse

    return StoredResponse(200, [], b"{}")


# -- issue 36, finding 1: nothing read from a store chooses code ----------------------------


class Tripwire(Exception):
    """Importable, but declared nowhere: building one from a record is the attack."""

    built = 0

    def __init__(self, *args: Any) -> None:
        Tripwire.built += 1
        super().__init__(*args)


def _forge(store: Any, scope: str, key: str, fingerprint: str, status: int, body: bytes) -> None:
    """Write a completed record as anyone who can write to the store could."""
    from idempotency.functions.results import RESULT_CONTENT_TYPE
    from idempotency.stores.base import StoredResponse

    store.delete(scope, key)
    claim = store.claim(scope, key, fingerprint=fingerprint, lease=30, ttl=300)
    forged = StoredResponse(status, [("Content-Type", RESULT_CONTENT_TYPE)], body)
    assert store.complete(scope, key, fence=claim.fence, response=forged, ttl=300)


def _forgeries(marker: Any) -> list[tuple[int, Any, type[Exception]]]:
    """Forged records, and what the call raises for each: never what they name."""
    shell = ["sh", "-c", f"touch {marker}"]
    popen = {"__idem__": "enum", "cls": "subprocess:Popen", "v": shell}
    corrupt = StoreCorrupted
    return [
        (200, popen, corrupt),
        (200, {"__idem__": "object", "cls": "subprocess:Popen", "v": shell}, corrupt),
        (200, {"__idem__": "dataclass", "cls": "os:system", "v": {"command": "id"}}, corrupt),
        (200, [{"ok": {"__idem__": "pydantic", "cls": "os:system", "v": "id"}}], corrupt),
        (200, {"__idem__": "enum", "cls": "builtins:eval", "v": "1"}, corrupt),
        # a declared class, with a tag that does not fit it
        (
            200,
            {"__idem__": "enum", "cls": "tests.functions.test_results:Receipt", "v": "EUR"},
            corrupt,
        ),
        (200, b"not json", corrupt),
        # a stored exception whose arguments name a class
        (500, {"type": "builtins:ValueError", "message": "x", "args": [popen]}, corrupt),
        # a stored exception of an importable class nobody declared: its name and
        # message come back (StoredError), the class is never built
        (
            500,
            {"type": "tests.functions.test_results:Tripwire", "message": "x", "args": ["x"]},
            StoredError,
        ),
        (500, {"type": "subprocess:Popen", "message": "x", "args": shell}, StoredError),
    ]


@pytest.mark.parametrize("store", ALL_STORES)
def test_a_forged_record_naming_a_class_is_refused_and_runs_nothing(
    store: str, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The review wrote ``{"__idem__": "enum", "cls": "subprocess:Popen", ...}`` into a
    RedisStore record, and the next call ran the shell command."""
    import json

    from idempotency.functions.arguments import fingerprint_of, qualified_name
    from idempotency.stores.base import get_store

    runs = Counter()
    marker = tmp_path / "pwned"

    def body(ref: str) -> Receipt:
        runs()
        return Receipt(Decimal(1), NOW, Currency.EUR)

    work = idempotent_function(
        key="forged:{ref}", store=store, fingerprint=False, store_errors=True
    )(body)
    resolved = get_store(store)
    fingerprint = fingerprint_of("function", qualified_name(body))
    Tripwire.built = 0
    for status, forged, raised in _forgeries(marker):
        ref = unique("card-4111111111111111")
        data = forged if isinstance(forged, bytes) else json.dumps(forged).encode()
        _forge(resolved, "functions", f"forged:{ref}", fingerprint, status, data)
        caplog.clear()
        with pytest.raises(raised) as caught:
            work(ref)
        if raised is StoreCorrupted:
            assert ref not in str(caught.value)
            assert "unreadable" in caplog.text and ref not in caplog.text
    assert not marker.exists()
    assert Tripwire.built == 0
    assert runs.count == 0  # refused, not silently run again


@pytest.mark.parametrize("store", ALL_STORES)
@pytest.mark.parametrize(
    ("status", "content_type"),
    [
        # a result is stored 200 and an exception 500, as tagged JSON: anything else
        # (issue 43, finding 3's planted status and content type) was not the library's
        pytest.param(302, "application/vnd.idempotency.result+json", id="302"),
        pytest.param(0, "application/vnd.idempotency.result+json", id="0"),
        pytest.param(201, "application/vnd.idempotency.result+json", id="201"),
        pytest.param(200, "text/html", id="text/html"),
        pytest.param(200, "", id="no-content-type"),
        # a serializer's result for a function without one
        pytest.param(200, "application/vnd.idempotency.custom", id="custom"),
    ],
)
def test_a_forged_status_or_content_type_is_refused_and_runs_nothing(
    store: str, status: int, content_type: str, caplog: pytest.LogCaptureFixture
) -> None:
    from idempotency.functions.arguments import fingerprint_of, qualified_name
    from idempotency.stores.base import StoredResponse, get_store

    runs = Counter()

    def body(ref: str) -> dict[str, str]:
        runs()
        return {"ok": "yes"}

    work = idempotent_function(key="forged:{ref}", store=store, fingerprint=False)(body)
    resolved = get_store(store)
    ref = unique("ref")
    key = f"forged:{ref}"
    claim = resolved.claim(
        "functions",
        key,
        fingerprint=fingerprint_of("function", qualified_name(body)),
        lease=30,
        ttl=300,
    )
    headers = [("Content-Type", content_type)] if content_type else []
    forged = StoredResponse(status, headers, b'{"ok": "forged"}')
    assert resolved.complete("functions", key, fence=claim.fence, response=forged, ttl=300)
    with pytest.raises(StoreCorrupted):
        work(ref)
    assert runs.count == 0
    assert log_ref("functions", key) in caplog.text and ref not in caplog.text


def test_a_forged_task_record_is_refused_and_runs_nothing(tmp_path: Any) -> None:
    import json

    from idempotency.stores.base import get_store

    runs = Counter()
    marker = tmp_path / "pwned"

    @idempotent_task(app=app, name="results.forged", key="forged:{ref}")
    def settle(ref: str) -> Receipt:
        runs()
        return Receipt(Decimal(1), NOW, Currency.EUR)

    ref = unique("ref")
    forged = {"__idem__": "enum", "cls": "subprocess:Popen", "v": ["sh", "-c", f"touch {marker}"]}
    with override_settings(IDEMPOTENCY={**using(DB_STORE)}):
        fingerprint = settle.get_idempotency_fingerprint((ref,), {})
        _forge(get_store(), "tasks", f"forged:{ref}", fingerprint, 200, json.dumps(forged).encode())
        with pytest.raises(StoreCorrupted):
            settle.apply((ref,), throw=True)
    assert not marker.exists()
    assert runs.count == 0


@dataclasses.dataclass
class Basket:
    receipts: list[Receipt]
    payment: Optional[Payment]  # noqa: UP045 - the spelling under test


def test_declared_classes_follow_the_annotation_into_containers_and_fields() -> None:
    from idempotency.functions.results import declared_classes

    found = set(declared_classes(dict[str, Union[Basket, Money]]))  # noqa: UP007
    assert {Basket, Receipt, Payment, Money, Currency, Decimal} <= found
    assert Tripwire not in found
