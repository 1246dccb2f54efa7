"""``idempotency/locks/postgres.py``: a lock is a transaction advisory lock on a connection
of its own, whose timeout is that transaction's ``idle_in_transaction_session_timeout``;
a failed attempt keeps no transaction open, and a lock whose session the server ended is
neither owned nor released. On the PostgreSQL of ``DATABASE_URL``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from psycopg.pq import TransactionStatus

from idempotency import lock
from idempotency.locks import PostgresLockBackend, advisory_key
from idempotency.locks.postgres import PostgresHolding
from tests.support.counting import unique
from tests.support.locks import Holdings, went_with_its_session

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_the_advisory_key_is_a_signed_64_bit_digest_of_the_name() -> None:
    assert advisory_key("orders/42") == advisory_key("orders/42") != advisory_key("orders/43")
    assert all(-(2**63) <= advisory_key(str(n)) < 2**63 for n in range(200))
    assert any(advisory_key(str(n)) < 0 for n in range(200))  # the whole signed range


@pytest.fixture
def postgres_holdings() -> Iterator[Holdings]:
    holdings = Holdings(PostgresLockBackend())
    yield holdings
    holdings.abandon_all()


def session(holding: PostgresHolding, sql: str) -> Any:
    with holding.connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def test_one_session_holds_the_lock_and_its_timeout_is_the_idle_timeout(
    postgres_holdings: Holdings,
) -> None:
    name = unique("pg-lock")
    first, second = postgres_holdings(name, 2.5), postgres_holdings(name, None)
    assert first.try_acquire() and first.owned()
    assert session(first, "SHOW idle_in_transaction_session_timeout") == "2500ms"
    assert not second.try_acquire() and not second.owned()
    # the failed attempt's transaction ended: it pins no server connection (psycopg's own
    # view of the session, which asks the server nothing)
    assert second.connection.connection.info.transaction_status == TransactionStatus.IDLE
    assert first.release() and not first.owned() and first.connection is None
    assert second.try_acquire()
    assert session(second, "SHOW idle_in_transaction_session_timeout") == "0"  # no timeout
    assert second.release()


def test_extend_adds_to_the_remaining_time_or_replaces_it(postgres_holdings: Holdings) -> None:
    held = postgres_holdings(unique("pg-extend"), 60.0)
    assert held.try_acquire()
    assert held.extend(60.0)
    assert 119.0 < held.timeout <= 120.0
    timeout = session(held, "SELECT current_setting('idle_in_transaction_session_timeout')")
    assert 119_000 < int(timeout.removesuffix("ms")) <= 120_000
    assert held.extend(5.0, replace_ttl=True) and held.timeout == 5.0
    assert session(held, "SHOW idle_in_transaction_session_timeout") == "5s"
    assert held.release()
    assert held.extend(5.0) is False  # not held any more


def test_a_lock_whose_session_ended_is_not_owned_nor_released(postgres_holdings: Holdings) -> None:
    name = unique("pg-ended")
    held = postgres_holdings(name, 30.0)
    assert held.try_acquire()
    pid = session(held, "SELECT pg_backend_pid()")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    went_with_its_session(held, lambda: postgres_holdings(name, 30.0))


# -- through lock() (moved from tests/locks/test_locks.py) --------------------------------


def test_postgres_lock_is_a_transaction_advisory_lock_on_its_own_connection() -> None:
    name = unique("advisory")
    key = advisory_key(name)
    assert advisory_key(name) == key and -(2**63) <= key < 2**63
    with lock(name, timeout=None, backend=PostgresLockBackend()) as held:
        with connection.cursor() as cursor:
            # Django's own connection is another session: it cannot take the lock
            cursor.execute("SELECT pg_try_advisory_lock(%s::bigint)", [key])
            assert cursor.fetchone()[0] is False
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND pid <> pg_backend_pid()"
            )
            assert cursor.fetchone()[0] >= 1
        assert held.extend(1.0)  # no timeout: extending only checks ownership
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s::bigint)", [key])
        assert cursor.fetchone()[0] is True
        cursor.execute("SELECT pg_advisory_unlock(%s::bigint)", [key])
