"""DatabaseStore on prepared statements: with Django's ``server_side_binding`` and
``prepare_threshold`` (what docs/benchmarks.md recommends where no transaction pooler
sits in front of PostgreSQL), psycopg prepares the store's lookup, claim and completion,
and every answer of the store is the same as with Django's default binding."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper

from idempotency.stores.base import ClaimStatus, StoredResponse
from idempotency.stores.database import DatabaseStore
from tests.support.clocks import age

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

RESPONSE = StoredResponse(201, [("Content-Type", "application/json")], b'{"ok": true}')
TABLE = '"idempotency_idempotencyrecord"'


@pytest.fixture
def prepared() -> Iterator[BaseDatabaseWrapper]:
    """The default connection reopened with server-side binding, preparing every
    statement it has run twice."""
    saved = connection.settings_dict["OPTIONS"]
    connection.close()
    connection.settings_dict["OPTIONS"] = {
        **saved,
        "server_side_binding": True,
        "prepare_threshold": 2,
    }
    try:
        yield connection
    finally:
        connection.close()
        connection.settings_dict["OPTIONS"] = saved


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_the_lookup_claim_and_completion_are_prepared(prepared: BaseDatabaseWrapper) -> None:
    store = DatabaseStore()
    for i in range(4):
        assert store.lookup("prep", f"k{i}", fingerprint="f") is None
        claim = store.claim("prep", f"k{i}", fingerprint="f", lease=30, ttl=60)
        assert claim.owned and not claim.taken_over
        assert store.complete("prep", f"k{i}", fence=claim.fence, response=RESPONSE, ttl=60)
        replay = store.lookup("prep", f"k{i}", fingerprint="f")
        assert replay is not None and replay.status is ClaimStatus.COMPLETED
        assert replay.response == RESPONSE
    statements = prepared_statements()
    assert any(s.startswith('SELECT "fingerprint", "state"') for s in statements), statements
    assert any(s.startswith(f"INSERT INTO {TABLE}") for s in statements), statements
    assert any(s.startswith(f"UPDATE {TABLE} SET \"state\" = 'completed'") for s in statements)


def test_every_answer_holds_on_prepared_statements(prepared: BaseDatabaseWrapper) -> None:
    store = DatabaseStore()
    for _ in range(3):  # past the threshold: the later rounds run prepared
        store.delete("prep", "held")
        held = store.claim("prep", "held", fingerprint="f", lease=30, ttl=60)
        assert held.owned
        busy = store.claim("prep", "held", fingerprint="f", lease=30, ttl=60)
        assert busy.status is ClaimStatus.IN_PROGRESS and busy.retry_after > 0
        other = store.claim("prep", "held", fingerprint="g", lease=30, ttl=60)
        assert other.status is ClaimStatus.MISMATCH
        assert not store.complete("prep", "held", fence=held.fence + 1, response=RESPONSE, ttl=60)
        age(store, "prep", "held", 31)  # the owner's lease ran out: a takeover
        taken = store.claim("prep", "held", fingerprint="f", lease=30, ttl=60)
        assert taken.owned and taken.taken_over and taken.fence != held.fence
        assert not store.complete("prep", "held", fence=held.fence, response=RESPONSE, ttl=60)
        assert store.complete("prep", "held", fence=taken.fence, response=RESPONSE, ttl=60)
        done = store.claim("prep", "held", fingerprint="f", lease=30, ttl=60)
        assert done.status is ClaimStatus.COMPLETED and done.response == RESPONSE
    assert len(prepared_statements()) >= 3
