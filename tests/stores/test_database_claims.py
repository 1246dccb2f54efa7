"""DatabaseStore's inserts: a short one for a free key, the full upsert only to replace.

A claim first sends ``INSERT … ON CONFLICT DO NOTHING``: a free key (nearly every
first request) costs that one statement, and a record already there is read, not
locked. Only an expired record or an abandoned lease sends the upsert that replaces
it. These tests count the statements of each case and, on PostgreSQL, check that a
claim meeting a live record leaves it unlocked.

MySQL and MariaDB have no ``DO NOTHING`` that reports what it met: every claim and every
insert-last there is one upsert (``ON DUPLICATE KEY UPDATE``, which replaces only an
expired or abandoned record) and one read of the row it left, whatever the key held.
"""

from __future__ import annotations

import uuid

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from idempotency.stores.base import ClaimStatus, StoredResponse
from idempotency.stores.database import DatabaseStore
from tests.support.clocks import age

pytestmark = pytest.mark.django_db(transaction=True)

RESPONSE = StoredResponse(201, [("Content-Type", "application/json")], b'{"ok": true}')
SCOPE = "user:1"


def statements(queries: list[dict[str, str]]) -> list[str]:
    """Each statement as its verb, the claim's two inserts told apart."""
    verbs = []
    for query in queries:
        sql = query["sql"]
        verb = sql.split()[0]
        if verb == "INSERT":
            verb = "INSERT DO NOTHING" if "DO NOTHING" in sql else "INSERT DO UPDATE"
        verbs.append(verb)
    return verbs


def sends(*elsewhere: str) -> list[str]:
    """The statements of one claim: ``elsewhere`` on PostgreSQL and SQLite; on MySQL and
    MariaDB the upsert and the read, in every case."""
    return ["INSERT DO UPDATE", "SELECT"] if connection.vendor == "mysql" else list(elsewhere)


def claimed(store: DatabaseStore, key: str, fingerprint: str = "fp") -> tuple[object, list[str]]:
    with CaptureQueriesContext(connection) as ctx:
        claim = store.claim(SCOPE, key, fingerprint=fingerprint, lease=30, ttl=120)
    return claim, statements(ctx.captured_queries)


def test_a_free_key_costs_one_short_insert() -> None:
    store = DatabaseStore()
    claim, sent = claimed(store, str(uuid.uuid4()))
    assert claim.owned and not claim.taken_over and claim.recovery_point == ""
    assert sent == sends("INSERT DO NOTHING")


@pytest.mark.parametrize("live", ["completed", "in_progress", "mismatch"])
def test_a_live_record_is_read_not_replaced(live: str) -> None:
    store = DatabaseStore()
    key = str(uuid.uuid4())
    owner = store.claim(SCOPE, key, fingerprint="fp", lease=30, ttl=120)
    if live == "completed":
        assert store.complete(SCOPE, key, fence=owner.fence, response=RESPONSE, ttl=120)
    claim, sent = claimed(store, key, fingerprint="other" if live == "mismatch" else "fp")
    expected = {
        "completed": ClaimStatus.COMPLETED,
        "in_progress": ClaimStatus.IN_PROGRESS,
        "mismatch": ClaimStatus.MISMATCH,
    }[live]
    assert claim.status is expected
    assert sent == sends("INSERT DO NOTHING", "SELECT")
    if live == "in_progress":
        assert 25 < claim.retry_after <= 30
    # the owner still owns it
    if live != "completed":
        assert store.complete(SCOPE, key, fence=owner.fence, response=RESPONSE, ttl=120)


def test_an_expired_record_is_replaced_by_the_upsert() -> None:
    store = DatabaseStore()
    key = str(uuid.uuid4())
    assert store.insert_completed(SCOPE, key, fingerprint="old", response=RESPONSE, ttl=60)
    age(store, SCOPE, key, 120)
    claim, sent = claimed(store, key, fingerprint="new")
    assert claim.owned and not claim.taken_over
    assert sent == sends("INSERT DO NOTHING", "SELECT", "INSERT DO UPDATE")
    record = store.model.objects.get(scope=SCOPE, key=key)
    assert (record.fingerprint, record.state, record.fence) == ("new", "in_progress", claim.fence)


def test_an_abandoned_lease_is_taken_over_with_its_recovery_point() -> None:
    store = DatabaseStore()
    key = str(uuid.uuid4())
    owner = store.claim(SCOPE, key, fingerprint="fp", lease=30, ttl=120)
    assert store.save_recovery_point(SCOPE, key, fence=owner.fence, name="charged", data={"n": 1})
    age(store, SCOPE, key, 31)  # the lease ran out, the record lives on
    claim, sent = claimed(store, key)
    assert claim.owned and claim.taken_over
    assert (claim.recovery_point, claim.recovery_data) == ("charged", {"n": 1})
    assert sent == sends("INSERT DO NOTHING", "SELECT", "INSERT DO UPDATE")
    # the earlier owner is fenced off
    assert not store.complete(SCOPE, key, fence=owner.fence, response=RESPONSE, ttl=120)
    assert store.complete(SCOPE, key, fence=claim.fence, response=RESPONSE, ttl=120)


@pytest.mark.postgres
def test_a_claim_meeting_a_live_record_locks_nothing() -> None:
    """The upsert's ``DO UPDATE … WHERE`` locks the row it decides to keep; the short
    insert does not, so another transaction can lock the row at once."""
    store = DatabaseStore()
    key = str(uuid.uuid4())
    owner = store.claim(SCOPE, key, fingerprint="fp", lease=30, ttl=120)
    other = connections.create_connection("default")
    try:
        with transaction.atomic():
            claim = store.claim(SCOPE, key, fingerprint="fp", lease=30, ttl=120)
            assert claim.status is ClaimStatus.IN_PROGRESS
            with other.cursor() as cursor:
                cursor.execute("SET lock_timeout = '100ms'")
                cursor.execute(
                    "SELECT fence FROM idempotency_idempotencyrecord"
                    " WHERE scope = %s AND key = %s FOR UPDATE NOWAIT",
                    [SCOPE, key],
                )
                assert cursor.fetchone() == (owner.fence,)
    finally:
        other.close()


def transaction_ids_taken(write: object, times: int) -> int:
    """How many of ``times`` transactions, each running ``write()``, took a transaction
    id (which makes the commit a durable one, a WAL flush)."""
    taken = 0
    for _ in range(times):
        with transaction.atomic():
            write()  # type: ignore[operator]
            with connection.cursor() as cursor:
                cursor.execute("SELECT txid_current_if_assigned()")
                taken += cursor.fetchone()[0] is not None
    return taken


@pytest.mark.postgres
def test_claims_meeting_a_live_record_rarely_take_a_transaction_id() -> None:
    """A lost claim is not a durable commit. The insert still evaluates the id column's
    default before it meets the conflict, and PostgreSQL writes a sequence to the WAL
    (taking a transaction id) on one fetch in 32 and on the first after a checkpoint;
    so a few of 64 lost claims take one. The upsert meeting a record it keeps takes one
    every time, which the same count shows."""
    store = DatabaseStore()
    key = str(uuid.uuid4())
    store.claim(SCOPE, key, fingerprint="fp", lease=30, ttl=120)
    lost = transaction_ids_taken(
        lambda: store.claim(SCOPE, key, fingerprint="fp", lease=30, ttl=120), 64
    )
    assert lost <= 4
    done = str(uuid.uuid4())
    assert store.insert_completed(SCOPE, done, fingerprint="fp", response=RESPONSE, ttl=60)
    kept = transaction_ids_taken(
        lambda: store.insert_completed(SCOPE, done, fingerprint="fp", response=RESPONSE, ttl=60),
        64,
    )
    assert kept == 64


@pytest.mark.parametrize("held", ["free", "live", "expired"])
def test_the_optimistic_insert_replaces_only_an_expired_record(held: str) -> None:
    """Atomic mode's insert-last: a free key costs the short insert; a taken one the
    upsert too, which replaces the record only when it expired."""
    store = DatabaseStore()
    key = str(uuid.uuid4())
    if held != "free":
        assert store.insert_completed(SCOPE, key, fingerprint="old", response=RESPONSE, ttl=60)
    if held == "expired":
        age(store, SCOPE, key, 120)
    with CaptureQueriesContext(connection) as ctx:
        inserted = store.insert_completed(SCOPE, key, fingerprint="new", response=RESPONSE, ttl=60)
    sent = statements(ctx.captured_queries)
    assert inserted is (held != "live")
    assert sent == sends("INSERT DO NOTHING", *([] if held == "free" else ["INSERT DO UPDATE"]))
    record = store.model.objects.get(scope=SCOPE, key=key)
    assert record.fingerprint == ("old" if held == "live" else "new")
    assert record.state == "completed"
