"""SQL statements the layer adds to a request, counted, not guessed.

Baseline: the same view without a key. The layer's statements are told apart
by the table they touch (``idempotency_idempotencyrecord``) and by the
savepoint the view's own ``atomic()`` turns into inside the layer's transaction.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from tests.support.stores import DB_STORE, REDIS_STORE, using
from tests.testapp.models import Wallet

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = "idempotency_idempotencyrecord"


def run(client: Client, key: str | None) -> list[str]:
    extra = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    with CaptureQueriesContext(connection) as ctx:
        response = client.post(
            "/t/api/", data='{"amount": 1}', content_type="application/json", **extra
        )
        assert response.status_code == 201
    return [q["sql"] for q in ctx.captured_queries]


def layer(queries: list[str]) -> list[str]:
    return [q for q in queries if TABLE in q]


@pytest.mark.parametrize(
    ("claim", "statements"),
    [
        # the default: look up, claim before the view, store the response: one statement
        # more than the optimistic insert-last, which runs the view before it claims
        ("first", ["SELECT", "INSERT", "UPDATE"]),
        ("optimistic", ["SELECT", "INSERT"]),
    ],
)
def test_database_store_atomic_adds_a_lookup_a_claim_and_a_completion(
    client_a: Client, wallet: Wallet, claim: str, statements: list[str]
) -> None:
    with override_settings(IDEMPOTENCY={"MODE": "atomic", "ATOMIC_CLAIM": claim}):
        baseline = run(client_a, None)
        key = str(uuid.uuid4())
        first = run(client_a, key)
        replay = run(client_a, key)
    first_layer = layer(first)
    assert [q.split()[0] for q in first_layer] == statements
    # beyond its two statements the layer only turns the view's atomic() into a savepoint
    others = [q for q in first if TABLE not in q]
    savepoints = [q for q in others if "SAVEPOINT" in q]
    assert len(others) - len(savepoints) == len(baseline) - len(
        [q for q in baseline if "SAVEPOINT" in q]
    )
    assert len(savepoints) <= 2
    # a replay: authentication, then one lookup; the view's own statements never run
    assert [q.split()[0] for q in layer(replay)] == ["SELECT"]
    assert len(replay) == 2


def test_database_store_lease_adds_claim_and_completion(client_a: Client, wallet: Wallet) -> None:
    with override_settings(IDEMPOTENCY={"MODE": "lease"}):
        key = str(uuid.uuid4())
        first = run(client_a, key)
        replay = run(client_a, key)
    # lease mode on the database looks up first: a replay is one SELECT, a first request
    # a SELECT that misses, the claim and the completion
    assert [q.split()[0] for q in layer(first)] == ["SELECT", "INSERT", "UPDATE"]
    assert [q.split()[0] for q in layer(replay)] == ["SELECT"]


@pytest.mark.redis
@pytest.mark.parametrize(
    ("mode", "warming_statements"),
    [
        # atomic: the claim (inside the transaction) meets the record, then reads it
        ("atomic", ["INSERT", "SELECT"]),
        ("lease", ["INSERT", "SELECT"]),
    ],
)
def test_response_cache_makes_replays_sql_free(
    client_a: Client, wallet: Wallet, mode: str, warming_statements: list[str]
) -> None:
    from idempotency.models import IdempotencyRecord
    from idempotency.stores.base import get_store

    with override_settings(IDEMPOTENCY={"MODE": mode, **using(DB_STORE, response_cache="default")}):
        key = str(uuid.uuid4())
        first = run(client_a, key)
        scope = IdempotencyRecord.objects.get(key=key).scope
        store: Any = get_store()
        cache_key = store.response_cache.key(scope, key)
        cache = store.response_cache.raw()
        cached_after_first = cache.get(cache_key)
        warming = run(client_a, key)
        cached_after_warming = cache.get(cache_key)
        replay = run(client_a, key)
    # a first request asks the cache (a miss) instead of the database: no SQL lookup,
    # only the claim and the completion, and it writes nothing to the cache
    assert [q.split()[0] for q in layer(first)] == ["INSERT", "UPDATE"]
    assert cached_after_first is None
    # the first replay misses the cache, so its claim meets the record and reads it,
    # filling the cache; every later replay runs no SQL beyond authentication
    assert [q.split()[0] for q in layer(warming)] == warming_statements
    assert cached_after_warming is not None
    assert layer(replay) == []
    assert len(replay) == 1  # the token lookup of authentication, nothing else


@pytest.mark.redis
def test_redis_store_adds_no_sql(client_a: Client, wallet: Any) -> None:
    with override_settings(IDEMPOTENCY=using(REDIS_STORE)):
        baseline = run(client_a, None)
        key = str(uuid.uuid4())
        first = run(client_a, key)
        replay = run(client_a, key)
    assert layer(first) == layer(replay) == []
    assert len(first) == len(baseline)
    assert len(replay) == 1


def test_a_function_replay_on_the_database_is_one_lookup() -> None:
    from idempotency import DatabaseStore, idempotent_function

    runs: list[str] = []

    @idempotent_function(key="queries:{ref}", store=DatabaseStore(), mode="lease")
    def settle(ref: str) -> dict[str, str]:
        runs.append(ref)
        return {"ref": ref}

    ref = str(uuid.uuid4())
    with CaptureQueriesContext(connection) as first:
        assert settle(ref) == {"ref": ref}
    with CaptureQueriesContext(connection) as replay:
        assert settle(ref) == {"ref": ref}
    assert runs == [ref]
    # the first call looks up (a miss), claims and completes; a repeat reads the record
    # once: no claim, whose conflict would lock the row and need a second statement
    assert [q["sql"].split()[0] for q in first.captured_queries] == ["SELECT", "INSERT", "UPDATE"]
    assert [q["sql"].split()[0] for q in replay.captured_queries] == ["SELECT"]


@pytest.mark.postgres
@pytest.mark.parametrize(("claim", "added"), [("first", 4), ("optimistic", 3)])
def test_on_postgresql_the_views_release_rides_with_the_completion(
    client_a: Client, wallet: Wallet, claim: str, added: int
) -> None:
    """Round trips, as psycopg sent them: the view's own atomic() becomes a savepoint,
    whose release shares one query with the layer's completion (or optimistic insert)."""
    from tests.support.wire import sent_queries

    def sent(key: str | None) -> list[str]:
        extra = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
        with sent_queries(connection) as queries:  # no CaptureQueriesContext: see below
            response = client_a.post(
                "/t/api/", data='{"amount": 1}', content_type="application/json", **extra
            )
        assert response.status_code == 201
        return queries

    with override_settings(IDEMPOTENCY={"MODE": "atomic", "ATOMIC_CLAIM": claim}):
        baseline = sent(None)
        first = sent(str(uuid.uuid4()))
    # the lookup, the claim (claim first only), the savepoint and the completion, which
    # carries the release: one round trip fewer than the statements Django ran
    assert len(first) == len(baseline) + added, first
    (release,) = [q for q in first if "RELEASE SAVEPOINT" in q]
    assert release.startswith("RELEASE SAVEPOINT")
    assert f'; {"UPDATE" if claim == "first" else "INSERT INTO"} "{TABLE}"' in release


@pytest.mark.postgres
def test_while_django_logs_queries_every_statement_is_sent_as_asked(
    client_a: Client, wallet: Wallet
) -> None:
    """Under DEBUG or a capturing test the log (and the wire) show each statement as it
    ran, the release on its own."""
    from tests.support.wire import sent_queries

    with override_settings(IDEMPOTENCY={"MODE": "atomic"}), sent_queries(connection) as wire:
        logged = run(client_a, str(uuid.uuid4()))
    assert all(q is not None and ";" not in q for q in logged)
    assert [q for q in logged if "SAVEPOINT" in q] == [q for q in wire if "SAVEPOINT" in q]
