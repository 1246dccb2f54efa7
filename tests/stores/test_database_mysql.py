"""DatabaseStore on MySQL and MariaDB: what their SQL has to get right beyond the contract.

Keys compare byte for byte (the columns' binary NO PAD collation), a 255-character key
of four-byte characters fits the unique index under strict ``sql_mode``, a claim is the
upsert and one read of its row, and a lock wait that ends without the lock (a lock
wait timeout, a deadlock: both provoked here for real, on a second session) is a 409 or
503 problem, never a 500.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import OperationalError, connection, connections, transaction
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from idempotency.core.engine import CLAIM_ATTEMPTS
from idempotency.models import IdempotencyRecord
from idempotency.stores.base import ClaimStatus, StoredResponse
from idempotency.stores.database import DatabaseStore
from tests.support.clocks import age
from tests.support.faults import assert_unavailable
from tests.support.http import post
from tests.support.problems import problem
from tests.support.services import mysql_transactions
from tests.support.storms import run_threads, wait_until
from tests.testapp.models import Effect, Wallet

pytestmark = [pytest.mark.mysql, pytest.mark.django_db(transaction=True)]

RESPONSE = StoredResponse(201, [("Content-Type", "application/json")], b'{"ok": true}')
SCOPE = "caller:mysql"
FIXED = "tests.stores.test_database_mysql.fixed_scope"


def fixed_scope(request: Any) -> str:
    return SCOPE


@pytest.fixture
def other() -> Iterator[Any]:
    """A second session on the test database, in a transaction the test ends."""
    session = connections.create_connection("default")
    session.ensure_connection()
    session.set_autocommit(False)
    try:
        yield session
    finally:
        session.rollback()
        session.close()


def hold_key(session: Any, key: str, *, weight: int = 0) -> None:
    """Insert the record of ``key`` in ``session``'s open transaction, after ``weight``
    other records (which make it the heavier transaction: InnoDB picks the lighter one as
    a deadlock's victim)."""
    with session.cursor() as cursor:
        for i in range(weight + 1):
            cursor.execute(
                "INSERT INTO idempotency_idempotencyrecord (scope, `key`, fingerprint, state,"
                " fence, method, route, response_headers, recovery_point, created_at,"
                " expires_at) VALUES (%s, %s, 'fp', 'in_progress', 7, 'POST', '/', '[]', '',"
                " UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)",
                [SCOPE, key if i == weight else f"{key}-weight-{i}"],
            )


# -- keys and columns --------------------------------------------------------------------------


def test_keys_differing_in_case_or_trailing_spaces_are_distinct() -> None:
    """MySQL's default collations would make these one key (case-insensitive, PAD SPACE)."""
    store = DatabaseStore()
    base = f"Key-{uuid.uuid4()}"
    keys = [base, base.lower(), base.upper(), f"{base} ", f"{base}  "]
    claims = [store.claim(SCOPE, k, fingerprint=k, lease=30, ttl=60) for k in keys]
    assert all(c.status is ClaimStatus.CLAIMED for c in claims)
    assert len({c.fence for c in claims}) == len(keys)
    for k, c in zip(keys, claims, strict=True):
        assert store.complete(SCOPE, k, fence=c.fence, response=RESPONSE, ttl=60)
        found = store.lookup(SCOPE, k, fingerprint=k)
        assert found is not None and found.status is ClaimStatus.COMPLETED
    scopes = ["tenant:Acme", "tenant:acme"]
    assert all(store.claim(s, base, fingerprint="fp", lease=30, ttl=60).owned for s in scopes)


def test_the_scope_and_key_columns_are_binary_utf8mb4() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name, character_set_name, collation_name, character_maximum_length"
            " FROM information_schema.COLUMNS WHERE table_schema = DATABASE()"
            " AND table_name = 'idempotency_idempotencyrecord'"
            " AND column_name IN ('scope', 'key') ORDER BY column_name"
        )
        rows = cursor.fetchall()
    assert [r[0] for r in rows] == ["key", "scope"]
    for _name, charset, collation, length in rows:
        assert charset == "utf8mb4" and length == 255
        assert collation in {"utf8mb4_nopad_bin", "utf8mb4_0900_bin"}


def test_scopes_differing_in_case_are_separate_record_caps() -> None:
    """Issue 43, finding 5: RecordQuota.scope kept the default case-insensitive collation
    (0005 left it out), so ``merchant:ACME`` and ``merchant:acme`` counted against one
    MAX_NEW_RECORDS cap (and so did ``merchant:acme `` under PAD SPACE)."""
    store = DatabaseStore()
    base = f"merchant:{uuid.uuid4().hex[:8]}"
    scopes = [f"{base}:ACME", f"{base}:acme", f"{base}:acme "]
    counts = [store.count_new_record(scope, window=600)[0] for scope in scopes]
    assert counts == [1, 1, 1]
    assert store.count_new_record(scopes[1], window=600)[0] == 2
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT collation_name FROM information_schema.COLUMNS WHERE table_schema ="
            " DATABASE() AND table_name = 'idempotency_recordquota' AND column_name = 'scope'"
        )
        assert cursor.fetchone()[0] in {"utf8mb4_nopad_bin", "utf8mb4_0900_bin"}


def test_a_255_character_key_of_four_byte_characters_fits_and_256_do_not() -> None:
    """The unique index holds 2 x 255 x 4 bytes (InnoDB's limit is 3072); strict mode
    refuses a value that does not fit instead of cutting it."""
    store = DatabaseStore()
    key = "\N{GRINNING FACE}" * 255
    scope = "\N{PILE OF POO}" * 255
    claim = store.claim(scope, key, fingerprint="fp", lease=30, ttl=60)
    assert claim.owned
    assert store.complete(scope, key, fence=claim.fence, response=RESPONSE, ttl=60)
    assert IdempotencyRecord.objects.get(scope=scope).key == key
    from django.db import DataError

    with pytest.raises(DataError):
        store.claim(scope, key + "x", fingerprint="fp", lease=30, ttl=60)


# -- the claim's statements ---------------------------------------------------------------------


def claimed(store: DatabaseStore, key: str, fingerprint: str = "fp") -> tuple[Any, list[str]]:
    with CaptureQueriesContext(connection) as ctx:
        claim = store.claim(SCOPE, key, fingerprint=fingerprint, lease=30, ttl=120)
    return claim, [q["sql"].split()[0] for q in ctx.captured_queries]


def test_a_claim_is_the_upsert_and_one_read_of_its_row() -> None:
    store = DatabaseStore()
    key = str(uuid.uuid4())
    first, sent = claimed(store, key)
    assert first.owned and not first.taken_over
    assert sent == ["INSERT", "SELECT"]
    again, sent = claimed(store, key)
    assert again.status is ClaimStatus.IN_PROGRESS and again.retry_after > 0
    assert sent == ["INSERT", "SELECT"]
    mismatch, _ = claimed(store, key, fingerprint="other")
    assert mismatch.status is ClaimStatus.MISMATCH
    # the live record was left as it was: its owner still completes it
    assert store.complete(SCOPE, key, fence=first.fence, response=RESPONSE, ttl=60)
    replay, sent = claimed(store, key)
    assert replay.status is ClaimStatus.COMPLETED and replay.response == RESPONSE


def test_a_takeover_keeps_the_recovery_point_and_says_so() -> None:
    store = DatabaseStore()
    key = str(uuid.uuid4())
    owner = store.claim(SCOPE, key, fingerprint="fp", lease=30, ttl=120)
    assert store.save_recovery_point(SCOPE, key, fence=owner.fence, name="charged", data={"n": 1})
    created = IdempotencyRecord.objects.get(scope=SCOPE, key=key).created_at
    age(store, SCOPE, key, 31)  # the lease ran out, the record did not
    taken, _ = claimed(store, key)
    assert taken.owned and taken.taken_over
    assert (taken.recovery_point, taken.recovery_data) == ("charged", {"n": 1})
    row = IdempotencyRecord.objects.get(scope=SCOPE, key=key)
    assert row.created_at < created and row.fence == taken.fence
    assert not store.complete(SCOPE, key, fence=owner.fence, response=RESPONSE, ttl=60)
    assert store.complete(SCOPE, key, fence=taken.fence, response=RESPONSE, ttl=60)
    age(store, SCOPE, key, 200)  # now expired: replaced, not taken over
    fresh, _ = claimed(store, key)
    assert fresh.owned and not fresh.taken_over and fresh.recovery_point == ""


def test_the_optimistic_insert_replaces_only_an_expired_record() -> None:
    store = DatabaseStore()
    key = str(uuid.uuid4())
    insert = store.insert_completed
    assert insert(SCOPE, key, fingerprint="a", response=RESPONSE, ttl=60)
    assert not insert(SCOPE, key, fingerprint="b", response=RESPONSE, ttl=60)
    assert IdempotencyRecord.objects.get(scope=SCOPE, key=key).fingerprint == "a"
    age(store, SCOPE, key, 120)
    assert insert(SCOPE, key, fingerprint="b", response=RESPONSE, ttl=60)
    assert IdempotencyRecord.objects.get(scope=SCOPE, key=key).fingerprint == "b"


# -- lock waits that end without the lock -------------------------------------------------------


def test_atomic_claim_waiting_past_lock_timeout_answers_409(
    client_a: Client, wallet: Wallet, other: Any
) -> None:
    """Another session holds the key's uncommitted record: the claim waits LOCK_TIMEOUT
    (MySQL's lock wait timeout, 1205, for real), then answers 409 with Retry-After; the
    view never ran, and the session's own lock wait timeout is put back."""
    key = str(uuid.uuid4())
    hold_key(other, key)
    settings = {"MODE": "atomic", "SCOPE": FIXED, "LOCK_TIMEOUT": 1}
    with override_settings(IDEMPOTENCY=settings):
        response = post(client_a, "/t/function/", key=key)
    assert response.status_code == 409
    assert int(response["Retry-After"]) >= 1
    assert problem(response)["code"] == "idempotency-request-in-progress"
    assert Effect.objects.count() == 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@SESSION.innodb_lock_wait_timeout")
        assert cursor.fetchone()[0] == 50


def test_lease_claim_waiting_past_the_lock_wait_timeout_answers_503(
    client_a: Client, wallet: Wallet, other: Any
) -> None:
    """Lease mode claims outside a transaction; its lock wait running out (1205, here the
    session's own one-second bound) is a 503 problem with Retry-After, not a 500."""
    key = str(uuid.uuid4())
    hold_key(other, key)
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
    try:
        with override_settings(IDEMPOTENCY={"MODE": "lease", "SCOPE": FIXED}):
            response = post(client_a, "/t/function/", key=key)
    finally:
        connection.close()
    assert_unavailable(response)
    assert "busy" in problem(response)["detail"]
    assert Effect.objects.count() == 0


def test_a_deadlock_at_the_optimistic_insert_answers_409(
    client_a: Client, wallet: Wallet, other: Any
) -> None:
    """A real deadlock (1213): the request's view has debited the wallet and its insert
    waits for the key another session holds, which then updates the wallet. InnoDB
    rolls the lighter transaction back, the request's: it answers 409 with Retry-After,
    and neither its effect nor its record stays."""
    key = str(uuid.uuid4())
    hold_key(other, key, weight=20)
    settings = {"MODE": "atomic", "ATOMIC_CLAIM": "optimistic", "SCOPE": FIXED}
    answers: list[Any] = []
    errors: list[int] = []

    def record_errors(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        try:
            return execute(sql, params, many, context)
        except OperationalError as exc:
            errors.append(exc.args[0])
            raise

    def request() -> None:
        try:
            with override_settings(IDEMPOTENCY=settings), connection.execute_wrapper(record_errors):
                answers.append(post(client_a, "/t/function/", key=key))
        finally:
            connections.close_all()

    thread = threading.Thread(target=request)
    thread.start()
    try:
        # polled every 0.2 s (see mysql_transactions)
        waited = wait_until(
            lambda: mysql_transactions("t.trx_state = 'LOCK WAIT'") >= 1 or answers,
            timeout=20,
            interval=0.2,
        )
        assert waited and not answers, f"no lock wait began: {answers}"
        with other.cursor() as cursor:  # the wallet row the request's view holds
            cursor.execute("UPDATE testapp_wallet SET balance = balance + 1 WHERE id = 1")
    finally:
        thread.join(30)
    assert len(answers) == 1
    assert errors == [1213]  # the request's insert was the deadlock's victim
    response = answers[0]
    assert response.status_code == 409, response.content
    assert int(response["Retry-After"]) >= 1
    assert problem(response)["code"] == "idempotency-request-in-progress"
    other.rollback()
    assert Effect.objects.count() == 0
    assert Wallet.objects.get(pk=1).balance == 1000
    assert not IdempotencyRecord.objects.filter(key=key).exists()


# -- the claim under both isolation levels --------------------------------------------------------


@pytest.mark.parametrize("isolation", ["READ COMMITTED", "REPEATABLE READ"])
@pytest.mark.parametrize("mode", ["atomic", "lease"])
def test_concurrent_duplicates_run_once_at_either_isolation_level(
    isolation: str, mode: str
) -> None:
    """20 threads claim one key at a time, 5 keys, each on its own session at
    ``isolation``: the owner runs the body (an insert, which commits with the record in
    atomic mode) and completes; every other gets the record, in progress or completed,
    and never runs. In atomic mode the first owner of each key rolls back once, so its
    waiting duplicates meet a key freed under their feet: InnoDB then picks deadlock
    victims among them (measured: several per key), which start their transaction again
    as atomic mode does (:data:`~idempotency.core.engine.CLAIM_ATTEMPTS`) and find the
    new owner's record."""
    store = DatabaseStore()
    duplicates = 20
    deadlocks: list[str] = []
    for _round in range(5):
        key = str(uuid.uuid4())
        rolled_back = threading.Event()

        def attempt(_i: int, key: str = key, rolled_back: threading.Event = rolled_back) -> str:
            with connection.cursor() as cursor:
                cursor.execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {isolation}")
            if mode == "lease":
                claim = store.claim(SCOPE, key, fingerprint="fp", lease=30, ttl=60)
                if not claim.owned:
                    return claim.status.value
                Effect.objects.create(label=key, amount=1)
                assert store.complete(SCOPE, key, fence=claim.fence, response=RESPONSE, ttl=60)
                return "ran"
            for _attempt in range(CLAIM_ATTEMPTS):  # as atomic mode does
                try:
                    with store.atomic():
                        claim = store.claim(SCOPE, key, fingerprint="fp", lease=30, ttl=60)
                        if not claim.owned:
                            return claim.status.value
                        Effect.objects.create(label=key, amount=1)
                        if not rolled_back.is_set():
                            rolled_back.set()
                            transaction.set_rollback(True)
                            return "rolled back"
                        assert store.complete(
                            SCOPE, key, fence=claim.fence, response=RESPONSE, ttl=60
                        )
                        return "ran"
                except OperationalError as exc:
                    if exc.args[0] != 1213:
                        raise
                    deadlocks.append(key)
            return "deadlocked"

        outcomes = run_threads(duplicates, attempt)
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        assert not errors, errors
        assert outcomes.count("ran") == 1, outcomes
        assert Effect.objects.filter(label=key).count() == 1
        assert set(outcomes) <= {"ran", "rolled back", "in_progress", "completed"}
    # the deadlocks of duplicates waiting on a rolled-back claim: victims start again
    assert mode == "atomic" or not deadlocks
