"""SQL statements the layer adds to a request, counted, not guessed.

Baseline: the same view without a key. The layer's statements are told apart
by the table they touch (``idempotency_idempotencyrecord``) and by the
savepoint the view's own ``atomic()`` turns into inside the layer's transaction.
The statements that find the caller are told apart by theirs (:data:`VIEWS`): each
test runs on a plain Django view, and on DRF's where DRF is installed.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from tests.support.drf import with_drf
from tests.support.stores import DB_STORE, REDIS_STORE, using
from tests.testapp.models import Wallet

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = "idempotency_idempotencyrecord"

#: The views (url, the caller's lookups, the caller's lookups without a key), each lookup
#: named by its table. The plain Django view never reads ``request.user``: its keyed
#: request's scope does, so the layer adds two SELECTs, Django's session row, then the
#: session's user (AuthenticationMiddleware's lazy user); a replay is those two and the
#: record's SELECT, three statements. DRF's view authenticates every request by its
#: token first (one SELECT, the user joined): the layer adds none, a replay is two.
VIEWS = with_drf(
    [pytest.param("/t/function/", ["django_session", "auth_user"], [], id="plain")],
    [pytest.param("/t/api/", ["authtoken_token"], ["authtoken_token"], id="drf")],
)
CALLER_TABLES = ("django_session", "auth_user", "authtoken_token")
#: All a replay from the database store runs, by view: the caller's lookups and the
#: record's SELECT (one fewer where the response cache or Redis answers: no record SELECT)
REPLAY_STATEMENTS = {"/t/function/": 3, "/t/api/": 2}


def run(client: Client, url: str, key: str | None) -> list[str]:
    extra = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    with CaptureQueriesContext(connection) as ctx:
        response = client.post(url, data='{"amount": 1}', content_type="application/json", **extra)
        assert response.status_code == 201
    return [q["sql"] for q in ctx.captured_queries]


def layer(queries: list[str]) -> list[str]:
    return [q for q in queries if TABLE in q]


def caller_lookups(queries: list[str]) -> list[str]:
    """The tables of the SELECTs that found the caller, in order."""
    return [
        table
        for q in queries
        for table in CALLER_TABLES
        if q.startswith("SELECT") and f'FROM "{table}"' in q
    ]


@pytest.mark.parametrize(("url", "lookups", "unkeyed_lookups"), VIEWS)
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
    client_a: Client,
    wallet: Wallet,
    claim: str,
    statements: list[str],
    url: str,
    lookups: list[str],
    unkeyed_lookups: list[str],
) -> None:
    with override_settings(IDEMPOTENCY={"MODE": "atomic", "ATOMIC_CLAIM": claim}):
        baseline = run(client_a, url, None)
        key = str(uuid.uuid4())
        first = run(client_a, url, key)
        replay = run(client_a, url, key)
    first_layer = layer(first)
    assert [q.split()[0] for q in first_layer] == statements
    assert caller_lookups(baseline) == unkeyed_lookups
    assert caller_lookups(first) == lookups
    # beyond its statements and the caller's lookups (VIEWS) the layer only turns the
    # view's atomic() into a savepoint
    others = [q for q in first if TABLE not in q]
    savepoints = [q for q in others if "SAVEPOINT" in q]
    assert len(others) - len(savepoints) - len(lookups) == len(baseline) - len(
        [q for q in baseline if "SAVEPOINT" in q]
    ) - len(unkeyed_lookups)
    assert len(savepoints) <= 2
    # a replay: the caller's lookups, then the record's; the view's own statements never
    # run: three statements on the plain view, two on DRF's (VIEWS)
    assert caller_lookups(replay) == lookups
    assert [q.split()[0] for q in layer(replay)] == ["SELECT"]
    assert len(replay) == REPLAY_STATEMENTS[url]


@pytest.mark.parametrize(("url", "lookups", "unkeyed_lookups"), VIEWS)
def test_database_store_lease_adds_claim_and_completion(
    client_a: Client, wallet: Wallet, url: str, lookups: list[str], unkeyed_lookups: list[str]
) -> None:
    with override_settings(IDEMPOTENCY={"MODE": "lease"}):
        key = str(uuid.uuid4())
        first = run(client_a, url, key)
        replay = run(client_a, url, key)
    # lease mode on the database looks up first: a replay is one SELECT, a first request
    # a SELECT that misses, the claim and the completion
    assert [q.split()[0] for q in layer(first)] == ["SELECT", "INSERT", "UPDATE"]
    assert [q.split()[0] for q in layer(replay)] == ["SELECT"]


@pytest.mark.redis
@pytest.mark.parametrize(("url", "lookups", "unkeyed_lookups"), VIEWS)
@pytest.mark.parametrize(
    ("mode", "warming_statements"),
    [
        # atomic: the claim (inside the transaction) meets the record, then reads it
        ("atomic", ["INSERT", "SELECT"]),
        ("lease", ["INSERT", "SELECT"]),
    ],
)
def test_response_cache_makes_replays_sql_free(
    client_a: Client,
    wallet: Wallet,
    mode: str,
    warming_statements: list[str],
    url: str,
    lookups: list[str],
    unkeyed_lookups: list[str],
) -> None:
    from idempotency.models import IdempotencyRecord
    from idempotency.stores.base import get_store

    with override_settings(IDEMPOTENCY={"MODE": mode, **using(DB_STORE, response_cache="default")}):
        key = str(uuid.uuid4())
        first = run(client_a, url, key)
        scope = IdempotencyRecord.objects.get(key=key).scope
        store: Any = get_store()
        cache_key = store.response_cache.key(scope, key)
        cache = store.response_cache.raw()
        cached_after_first = cache.get(cache_key)
        warming = run(client_a, url, key)
        cached_after_warming = cache.get(cache_key)
        replay = run(client_a, url, key)
    # a first request asks the cache (a miss) instead of the database: no SQL lookup,
    # only the claim and the completion, and it writes nothing to the cache
    assert [q.split()[0] for q in layer(first)] == ["INSERT", "UPDATE"]
    assert cached_after_first is None
    # the first replay misses the cache, so its claim meets the record and reads it,
    # filling the cache; every later replay runs no SQL but the caller's lookups: two
    # on the plain view (the session, its user), one on DRF's (the token)
    assert [q.split()[0] for q in layer(warming)] == warming_statements
    assert cached_after_warming is not None
    assert layer(replay) == []
    assert caller_lookups(replay) == lookups
    assert len(replay) == REPLAY_STATEMENTS[url] - 1


@pytest.mark.redis
@pytest.mark.parametrize(("url", "lookups", "unkeyed_lookups"), VIEWS)
def test_redis_store_adds_no_sql(
    client_a: Client, wallet: Any, url: str, lookups: list[str], unkeyed_lookups: list[str]
) -> None:
    with override_settings(IDEMPOTENCY=using(REDIS_STORE)):
        baseline = run(client_a, url, None)
        key = str(uuid.uuid4())
        first = run(client_a, url, key)
        replay = run(client_a, url, key)
    # no SQL but the caller's lookups, which the plain view's scope adds (VIEWS)
    assert layer(first) == layer(replay) == []
    assert caller_lookups(baseline) == unkeyed_lookups
    assert caller_lookups(first) == caller_lookups(replay) == lookups
    assert len(first) - len(lookups) == len(baseline) - len(unkeyed_lookups)
    assert len(replay) == REPLAY_STATEMENTS[url] - 1


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
@pytest.mark.parametrize(("url", "lookups", "unkeyed_lookups"), VIEWS)
@pytest.mark.parametrize(("claim", "added"), [("first", 4), ("optimistic", 3)])
def test_on_postgresql_the_views_release_rides_with_the_completion(
    client_a: Client,
    wallet: Wallet,
    claim: str,
    added: int,
    url: str,
    lookups: list[str],
    unkeyed_lookups: list[str],
) -> None:
    """Round trips, as psycopg sent them: the view's own atomic() becomes a savepoint,
    whose release shares one query with the layer's completion (or optimistic insert)."""
    from tests.support.wire import sent_queries

    def sent(key: str | None) -> list[str]:
        extra = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
        with sent_queries(connection) as queries:  # no CaptureQueriesContext: see below
            response = client_a.post(
                url, data='{"amount": 1}', content_type="application/json", **extra
            )
        assert response.status_code == 201
        return queries

    with override_settings(IDEMPOTENCY={"MODE": "atomic", "ATOMIC_CLAIM": claim}):
        baseline = sent(None)
        first = sent(str(uuid.uuid4()))
    # the lookup, the claim (claim first only), the savepoint and the completion, which
    # carries the release: one round trip fewer than the statements Django ran; and the
    # caller's lookups that only the keyed request runs (the plain view's two, VIEWS)
    assert len(first) == len(baseline) + added + len(lookups) - len(unkeyed_lookups), first
    (release,) = [q for q in first if "RELEASE SAVEPOINT" in q]
    assert release.startswith("RELEASE SAVEPOINT")
    assert f'; {"UPDATE" if claim == "first" else "INSERT INTO"} "{TABLE}"' in release


@pytest.mark.postgres
@pytest.mark.parametrize(("url", "lookups", "unkeyed_lookups"), VIEWS)
def test_while_django_logs_queries_every_statement_is_sent_as_asked(
    client_a: Client, wallet: Wallet, url: str, lookups: list[str], unkeyed_lookups: list[str]
) -> None:
    """Under DEBUG or a capturing test the log (and the wire) show each statement as it
    ran, the release on its own."""
    from tests.support.wire import sent_queries

    with override_settings(IDEMPOTENCY={"MODE": "atomic"}), sent_queries(connection) as wire:
        logged = run(client_a, url, str(uuid.uuid4()))
    assert all(q is not None and ";" not in q for q in logged)
    assert [q for q in logged if "SAVEPOINT" in q] == [q for q in wire if "SAVEPOINT" in q]
