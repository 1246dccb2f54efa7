"""Issue 43, finding 1: every completed record is authenticated as a whole, on every store.

The attacker writes the store (a Redis without AUTH, a shared cache, a database account
with write access to the table) but lacks the application's secrets. Whatever they copy,
alter or make up is refused (``RecordForged``: never replayed, nothing runs), in both
codec modes; a record made under a ``SECRET_KEY_FALLBACKS`` secret still replays. The
database runs on the database of the run (SQLite, PostgreSQL or MariaDB: ``DATABASE_URL``).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.test import Client, override_settings

from idempotency import idempotent_function, signals
from idempotency.exceptions import RecordForged, StoreCorrupted
from idempotency.scopes import principal_scope
from idempotency.stores import records
from idempotency.stores.base import BaseStore, ClaimStatus, StoredResponse
from idempotency.stores.cache import CacheStore
from idempotency.stores.database import DatabaseStore
from idempotency.stores.redis import RedisStore
from tests.support import store_writer as writer
from tests.support.counting import received
from tests.support.http import new_key
from tests.support.stores import STORE_VARIANTS, variant_params
from tests.testapp.executions import executions

pytestmark = pytest.mark.django_db(transaction=True)

ALICE, MALLORY = "user:alice", "user:mallory"
PAN = b"4111111111111111"
RESPONSE = StoredResponse(201, [("Content-Type", "application/json")], b'{"pan": "%s"}' % PAN)
MALLORYS = StoredResponse(201, [("Content-Type", "application/json")], b'{"pan": "none"}')
FERNET_KEY = Fernet.generate_key().decode()
CODECS = {
    "plain": {},
    "fernet": {
        "BODY_CODEC": "idempotency.codecs.FernetCodec",
        "BODY_ENCRYPTION_KEYS": [FERNET_KEY],
    },
}


@pytest.fixture(
    params=[
        pytest.param("database", id="database"),
        pytest.param("redis", id="redis", marks=pytest.mark.redis),
        pytest.param("cache", id="cache"),
    ]
)
def store(request: pytest.FixtureRequest) -> BaseStore:
    if request.param == "database":
        return DatabaseStore()
    return RedisStore() if request.param == "redis" else CacheStore()


@pytest.fixture(params=list(CODECS))
def codec(request: pytest.FixtureRequest) -> Iterator[str]:
    with override_settings(IDEMPOTENCY=CODECS[request.param]):
        yield request.param


@pytest.fixture
def forgeries() -> Iterator[list[dict[str, Any]]]:
    """The ``record_forged`` signals sent while the test runs."""
    with received(signals.record_forged) as sent:
        yield sent


def completed(
    store: BaseStore, scope: str, key: str, fp: str, response: StoredResponse = RESPONSE
) -> None:
    claim = store.claim(scope, key, fingerprint=fp, lease=30, ttl=600)
    assert claim.owned
    assert store.complete(scope, key, fence=claim.fence, response=response, ttl=600, fingerprint=fp)


def replayed(store: BaseStore, scope: str, key: str, fp: str) -> StoredResponse:
    found = store.lookup(scope, key, fingerprint=fp)
    assert found is not None and found.status is ClaimStatus.COMPLETED
    assert found.response is not None
    return found.response


def refused(store: BaseStore, scope: str, key: str, fp: str) -> None:
    """Every way in to the record raises ``RecordForged``: nothing is replayed, and no
    claim is given (the body would run again)."""
    with pytest.raises(RecordForged):
        store.lookup(scope, key, fingerprint=fp)
    with pytest.raises(RecordForged):
        store.claim(scope, key, fingerprint=fp, lease=30, ttl=600)


def tag_of(store: BaseStore, scope: str, key: str) -> str:
    tag = writer.field(store, scope, key, "tag")
    return tag.decode() if isinstance(tag, bytes) else str(tag)


def test_a_completed_record_replays_and_carries_its_tag(store: BaseStore, codec: str) -> None:
    key = new_key()
    completed(store, ALICE, key, "fp-a")
    assert replayed(store, ALICE, key, "fp-a") == RESPONSE
    expiry, _colon, mac = tag_of(store, ALICE, key).partition(":")
    assert expiry.isdigit() and len(mac) == 64


@pytest.mark.parametrize("retarget", [False, True], ids=["as-is", "fingerprint-retargeted"])
def test_alices_record_copied_into_mallorys_is_refused(
    store: BaseStore,
    codec: str,
    retarget: bool,
    forgeries: list[dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The finding: alice's stored response (encrypted or not) copied over mallory's own
    record. With the fingerprint set to mallory's request too, the copy would replay
    alice's card number to mallory without the tag binding it to alice's record."""
    alices, mallorys = new_key(), new_key()
    completed(store, ALICE, alices, "fp-a")
    completed(store, MALLORY, mallorys, "fp-m", MALLORYS)
    writer.copy(store, (ALICE, alices), (MALLORY, mallorys))
    if retarget:
        writer.change(store, MALLORY, mallorys, fingerprint="fp-m")
    caplog.set_level(logging.ERROR, logger="idempotency")
    refused(store, MALLORY, mallorys, "fp-m")
    assert replayed(store, ALICE, alices, "fp-a") == RESPONSE  # alice's own still replays
    assert forgeries and {sent["scope"] for sent in forgeries} == {MALLORY}
    assert {sent["store"] for sent in forgeries} == {type(store).__name__}
    assert "failed its authentication" in caplog.text
    assert mallorys not in caplog.text  # the key's hash is logged, never the key


ALTERATIONS = {
    "status": lambda tag: {"status": 200},
    "headers": lambda tag: {"headers": [["Content-Type", "text/html"]]},
    "body": lambda tag: {"body": b'{"pan": "4000000000000002"}'},
    "fence": lambda tag: {"fence": 12345},
    "tag-expiry": lambda tag: {"tag": f"{int(tag.split(':')[0]) + 86_400_000}:{tag[-64:]}"},
    "no-tag": lambda tag: {"tag": ""},
    "garbage-tag": lambda tag: {"tag": "garbage"},
    "made-up-tag": lambda tag: {"tag": f"{tag.split(':')[0]}:{'0' * 64}"},
}


@pytest.mark.parametrize("alteration", list(ALTERATIONS))
def test_an_altered_record_is_refused(store: BaseStore, codec: str, alteration: str) -> None:
    key = new_key()
    completed(store, ALICE, key, "fp-a")
    writer.change(store, ALICE, key, **ALTERATIONS[alteration](tag_of(store, ALICE, key)))
    refused(store, ALICE, key, "fp-a")


def test_a_record_with_no_tag_field_at_all_is_refused(store: BaseStore) -> None:
    key = new_key()
    completed(store, ALICE, key, "fp-a")
    record = writer.read(store, ALICE, key)
    if isinstance(store, DatabaseStore):
        record["mac"] = ""  # the column has a default: blank is all a writer can leave
    else:
        del record["mac"]
    writer.write(store, ALICE, key, record)
    refused(store, ALICE, key, "fp-a")


def test_an_altered_fingerprint_never_replays_for_another_request(store: BaseStore) -> None:
    """The record of one request re-labelled with another request's fingerprint (same
    key): the other request is not answered with it."""
    key = new_key()
    completed(store, ALICE, key, "fp-a")
    writer.change(store, ALICE, key, fingerprint="fp-b")
    refused(store, ALICE, key, "fp-b")
    refused(store, ALICE, key, "fp-a")


def test_a_store_expiry_lengthened_past_the_tags_is_not_replayed(
    store: BaseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The expiry is authenticated too: a record completed 11 minutes ago with a TTL of
    10 whose store expiry a writer lengthened is expired, never replayed and never
    claimed (its body does not run again while the store still holds it)."""
    key = new_key()
    real = records.now_ms
    monkeypatch.setattr(records, "now_ms", lambda: real() - 660_000)
    completed(store, ALICE, key, "fp-a")
    monkeypatch.setattr(records, "now_ms", real)
    writer.lengthen(store, ALICE, key, 3600)
    assert store.lookup(ALICE, key, fingerprint="fp-a") is None
    again = store.claim(ALICE, key, fingerprint="fp-a", lease=30, ttl=600)
    assert again.status is ClaimStatus.IN_PROGRESS


def test_a_record_under_a_fallback_secret_replays_and_under_a_dropped_one_is_refused(
    store: BaseStore, codec: str
) -> None:
    old, new = "old-secret-" + "o" * 50, "new-secret-" + "n" * 50
    key = new_key()
    with override_settings(SECRET_KEY=old):
        completed(store, ALICE, key, "fp-a")
    with override_settings(SECRET_KEY=new, SECRET_KEY_FALLBACKS=[old]):
        assert replayed(store, ALICE, key, "fp-a") == RESPONSE
    with override_settings(SECRET_KEY=new):
        refused(store, ALICE, key, "fp-a")


def test_a_forgery_is_counted_in_the_metrics(store: BaseStore) -> None:
    from prometheus_client import REGISTRY

    from idempotency.contrib import prometheus as metrics

    key = new_key()
    completed(store, ALICE, key, "fp-a")
    writer.change(store, ALICE, key, status=200)
    labels = {"outcome": "record_forged", "route": "-", "store": type(store).__name__}

    def counted() -> float:
        return REGISTRY.get_sample_value("idempotency_outcomes_total", labels) or 0.0

    with override_settings(IDEMPOTENCY={"METRICS": True}):
        metrics.connect()
        before = counted()
        with pytest.raises(RecordForged):
            store.lookup(ALICE, key, fingerprint="fp-a")
        assert counted() == before + 1


# -- the response cache in front of the database ------------------------------------------


def test_a_forged_response_cache_entry_is_ignored_and_the_database_answers(
    forgeries: list[dict[str, Any]],
) -> None:
    store = DatabaseStore(response_cache="default")
    alices, mallorys = new_key(), new_key()
    completed(store, ALICE, alices, "fp-a")
    completed(store, MALLORY, mallorys, "fp-m", MALLORYS)
    for scope, key, fp in ((ALICE, alices, "fp-a"), (MALLORY, mallorys, "fp-m")):
        replayed(store, scope, key, fp)  # the first replay fills the cache
    responses = store.response_cache
    assert responses is not None
    raw = responses.raw()
    alices_entry = raw.get(responses.key(ALICE, alices))
    assert isinstance(alices_entry, bytes) and PAN in alices_entry
    # alice's entry under mallory's name: mallory's own record answers, from the database
    raw.set(responses.key(MALLORY, mallorys), alices_entry, 600)
    assert store.peek(MALLORY, mallorys, fingerprint="fp-a") is None
    assert replayed(store, MALLORY, mallorys, "fp-m") == MALLORYS
    # an altered body in alice's own entry: the database's authenticated one answers
    raw.set(responses.key(ALICE, alices), alices_entry.replace(PAN, b"4000000000000002"), 600)
    assert replayed(store, ALICE, alices, "fp-a") == RESPONSE
    assert len(forgeries) >= 2 and all("response cache" in s["store"] for s in forgeries)


# -- functions and tasks keep their results in the same records ----------------------------


def test_a_forged_function_result_raises_and_runs_nothing(store: BaseStore) -> None:
    runs: list[str] = []

    @idempotent_function(key="charge:{ref}", store=store)
    def charge(ref: str) -> dict[str, str]:
        runs.append(ref)
        return {"charged": ref}

    ref = str(uuid.uuid4())
    assert charge(ref) == {"charged": ref}
    assert charge(ref) == {"charged": ref}  # replayed
    body = writer.field(store, "functions", f"charge:{ref}", "body")
    writer.change(
        store, "functions", f"charge:{ref}", body=bytes(body).replace(b"charged", b"refund")
    )
    with pytest.raises(RecordForged) as raised:
        charge(ref)
    assert isinstance(raised.value, StoreCorrupted)  # handled wherever an unreadable one is
    assert runs == [ref]


# -- over HTTP: the finding as reported -----------------------------------------------------


@pytest.mark.urls("tests.urls")
@pytest.mark.parametrize("variant", variant_params("db-atomic", "db-lease", "redis", "cache"))
@pytest.mark.parametrize("codec_name", list(CODECS))
def test_mallory_never_receives_alices_encrypted_response(
    variant: str,
    codec_name: str,
    user: Any,
    other_user: Any,
    client_a: Client,
    client_b: Client,
    execution_log: Any,
) -> None:
    def pay(client: Client, key: str, pan: str) -> Any:
        return client.post(
            "/t/data/echo/",
            data=json.dumps({"pan": pan}),
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=key,
        )

    alices, mallorys = new_key(), new_key()
    with override_settings(IDEMPOTENCY={**STORE_VARIANTS[variant], **CODECS[codec_name]}):
        from idempotency.stores.base import get_store

        store = get_store()
        assert pay(client_a, alices, PAN.decode()).status_code == 201
        assert pay(client_b, mallorys, "none").status_code == 201
        alice, mallory = principal_scope(user), principal_scope(other_user)
        assert alice and mallory
        # alice's record over mallory's, with mallory's fingerprint so it matches her retry
        fingerprint = writer.field(store, mallory, mallorys, "fingerprint")
        writer.copy(store, (alice, alices), (mallory, mallorys))
        writer.change(store, mallory, mallorys, fingerprint=fingerprint)
        again = pay(client_b, mallorys, "none")
    assert again.status_code == 500
    assert again["Content-Type"] == "application/problem+json"
    assert json.loads(again.content)["code"] == "idempotency-record-forged"
    assert PAN not in again.content
    assert executions(execution_log)[mallorys] == 1  # nothing ran again
