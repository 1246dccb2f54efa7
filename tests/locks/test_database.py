"""``idempotency/locks/database.py``: a database lock holds a connection of its own, of its
own vendor's database. On PostgreSQL a lock is a transaction advisory lock whose timeout
is that transaction's ``idle_in_transaction_session_timeout``, and a failed attempt keeps
no transaction open; on MySQL and MariaDB a ``GET_LOCK`` named lock, named by a hash of
the key prefix and the lock's name, whose timeout is the session's ``wait_timeout`` (whole
seconds, rounded up). On both, a lock whose session the server ended is neither owned nor
released. On the server database of ``DATABASE_URL`` (each vendor's tests skip on the
other's)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from psycopg.pq import TransactionStatus

from idempotency import lock
from idempotency.locks import (
    Holding,
    Lock,
    MySQLLockBackend,
    PostgresLockBackend,
    advisory_key,
    lock_name,
)
from idempotency.locks.database import DatabaseLockBackend, MySQLHolding, PostgresHolding
from tests.support.counting import unique
from tests.support.locks import Holdings, went_with_its_session

pytestmark = pytest.mark.django_db


# -- every database lock -------------------------------------------------------------------


def test_a_database_lock_refuses_another_vendors_database() -> None:
    class Other(DatabaseLockBackend):
        vendor = "oracle" if connection.vendor != "oracle" else "sqlite"
        name = "other"

        def holding(self, name: str, timeout: float | None) -> Holding:
            raise AssertionError("not reached")

    with pytest.raises(ImproperlyConfigured, match="The other lock backend needs a"):
        Other().new_connection()


def test_a_database_lock_has_a_connection_of_its_own() -> None:
    class Same(DatabaseLockBackend):
        vendor = connection.vendor
        name = "same"

        def holding(self, name: str, timeout: float | None) -> Holding:
            raise AssertionError("not reached")

    own = Same().new_connection()
    try:
        assert own is not connection and own.alias == "default"
        assert own.settings_dict["NAME"] == connection.settings_dict["NAME"]
        assert "pool" not in own.settings_dict["OPTIONS"]
        own.validate_thread_sharing()  # released from any thread
        threading_result: list[Any] = []
        worker = threading.Thread(
            target=lambda: threading_result.append(own.validate_thread_sharing())
        )
        worker.start()
        worker.join(30)
        assert threading_result == [None]
    finally:
        own.close()


# -- PostgreSQL ------------------------------------------------------------------------------


@pytest.mark.postgres
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


@pytest.mark.postgres
def test_one_session_holds_the_lock_and_its_timeout_is_the_idle_timeout(
    postgres_holdings: Holdings,
) -> None:
    name = unique("pg-lock")
    # a timeout no stall of this process between the first's statements outlasts (2.5 s
    # could: the server ended its session, and the second took the lock)
    first, second = postgres_holdings(name, 25.5), postgres_holdings(name, None)
    assert first.try_acquire() and first.owned()
    assert session(first, "SHOW idle_in_transaction_session_timeout") == "25500ms"
    assert not second.try_acquire() and not second.owned()
    # the failed attempt's transaction ended: it pins no server connection (psycopg's own
    # view of the session, which asks the server nothing)
    assert second.connection.connection.info.transaction_status == TransactionStatus.IDLE
    assert first.release() and not first.owned() and first.connection is None
    assert second.try_acquire()
    assert session(second, "SHOW idle_in_transaction_session_timeout") == "0"  # no timeout
    assert second.release()


@pytest.mark.postgres
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


@pytest.mark.postgres
def test_a_postgres_lock_whose_session_ended_is_not_owned_nor_released(
    postgres_holdings: Holdings,
) -> None:
    name = unique("pg-ended")
    held = postgres_holdings(name, 30.0)
    assert held.try_acquire()
    pid = session(held, "SELECT pg_backend_pid()")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    went_with_its_session(held, lambda: postgres_holdings(name, 30.0))


@pytest.mark.postgres
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


# -- MySQL and MariaDB ---------------------------------------------------------------------


#: A year: the ``wait_timeout`` of a lock with no timeout (MySQL's and MariaDB's largest).
FOREVER = 31_536_000


@pytest.mark.mysql
def test_the_name_is_a_hash_of_the_prefix_and_the_name_in_64_characters() -> None:
    name = lock_name("orders/42")
    assert len(name) == 64 and int(name, 16) >= 0
    assert lock_name("orders/42") == name != lock_name("orders/43")
    assert lock_name("orders/42", "other-app") != name  # the server's namespace is shared
    assert len(lock_name("x" * 1000)) == 64


@pytest.fixture
def mysql_holdings() -> Iterator[Holdings]:
    holdings = Holdings(MySQLLockBackend(key_prefix="beyond-locks"))
    yield holdings
    holdings.abandon_all()


def wait_timeout(holding: MySQLHolding) -> int:
    with holding.connection.cursor() as cursor:
        cursor.execute("SELECT @@SESSION.wait_timeout")
        return int(cursor.fetchone()[0])


@pytest.mark.mysql
def test_one_session_holds_the_lock_and_its_timeout_is_the_wait_timeout(
    mysql_holdings: Holdings,
) -> None:
    name = unique("my-lock")
    # a timeout no stall of this process between the first's statements outlasts (2.2 s
    # could: the server ended its session, and the second took the lock)
    first, second = mysql_holdings(name, 22.2), mysql_holdings(name, None)
    assert first.name == lock_name(name, "beyond-locks")
    assert first.try_acquire() and first.owned()
    assert wait_timeout(first) == 23  # rounded up
    with connection.cursor() as cursor:  # Django's own session sees it taken
        cursor.execute("SELECT IS_FREE_LOCK(%s)", [first.name])
        assert cursor.fetchone()[0] == 0
    assert not second.try_acquire() and not second.owned()
    other_app = Holdings(MySQLLockBackend(key_prefix="other-app"))
    try:
        assert other_app(name, None).try_acquire()  # another namespace
    finally:
        other_app.abandon_all()
    assert first.release() and first.connection is None
    assert second.try_acquire()
    assert wait_timeout(second) == FOREVER
    assert second.release()


@pytest.mark.mysql
def test_extend_adds_to_the_timeout_or_replaces_it(mysql_holdings: Holdings) -> None:
    held = mysql_holdings(unique("my-extend"), 60.0)
    assert held.try_acquire()
    assert held.extend(30.5) and held.timeout == 90.5
    assert wait_timeout(held) == 91
    assert held.extend(5.0, replace_ttl=True) and held.timeout == 5.0
    assert wait_timeout(held) == 5
    assert held.release()
    assert held.extend(5.0) is False


@pytest.mark.mysql
def test_a_mysql_lock_whose_session_ended_is_not_owned_nor_released(
    mysql_holdings: Holdings,
) -> None:
    name = unique("my-ended")
    held = mysql_holdings(name, 30.0)
    assert held.try_acquire()
    with connection.cursor() as cursor:
        cursor.execute("KILL %s", [held.connection.connection.thread_id()])
    went_with_its_session(held, lambda: mysql_holdings(name, 30.0))


@pytest.mark.mysql
def test_mysql_lock_is_a_named_lock_of_its_own_session() -> None:
    name = unique("named" * 30)  # longer than MySQL's 64 characters: hashed
    hashed = lock_name(name)
    assert len(hashed) == 64 and lock_name(name) == hashed
    with lock(name, timeout=None, backend=MySQLLockBackend()) as held:
        with connection.cursor() as cursor:
            # Django's own connection is another session: it cannot take the lock
            cursor.execute("SELECT GET_LOCK(%s, 0), IS_USED_LOCK(%s) <> CONNECTION_ID()",
                           [hashed, hashed])  # fmt: skip
            assert cursor.fetchone() == (0, 1)
        assert held.extend(1.0)  # no timeout: extending only checks ownership
    with connection.cursor() as cursor:
        cursor.execute("SELECT GET_LOCK(%s, 0), RELEASE_LOCK(%s)", [hashed, hashed])
        assert cursor.fetchone() == (1, 1)


@pytest.mark.mysql
def test_mysql_lock_whose_holder_is_killed_is_free_at_once() -> None:
    """A holder whose session ends (a crash, a KILL) frees the lock with it."""
    name = unique("killed")
    held = Lock(name, timeout=30, backend=MySQLLockBackend())
    assert held.acquire()
    holding: Any = held._holding
    with connection.cursor() as cursor:
        cursor.execute("KILL %s", [holding.connection.connection.thread_id()])
    second = lock(name, backend=MySQLLockBackend())
    assert second.acquire(wait=5)
    assert not held.release()
    assert second.release()
