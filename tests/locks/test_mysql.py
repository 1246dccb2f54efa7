"""``idempotency/locks/mysql.py``: a lock is a ``GET_LOCK`` named lock of a session of its
own, named by a hash of the key prefix and the lock's name, whose timeout is the session's
``wait_timeout`` (whole seconds, rounded up); a lock whose session ended is neither owned
nor released. On the MySQL or MariaDB of ``DATABASE_URL``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from idempotency import lock
from idempotency.locks import Lock, MySQLLockBackend, lock_name
from idempotency.locks.mysql import MySQLHolding
from tests.support.counting import unique
from tests.support.locks import Holdings, went_with_its_session

pytestmark = [pytest.mark.mysql, pytest.mark.django_db]

#: A year: the ``wait_timeout`` of a lock with no timeout (MySQL's and MariaDB's largest).
FOREVER = 31_536_000


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


def test_one_session_holds_the_lock_and_its_timeout_is_the_wait_timeout(
    mysql_holdings: Holdings,
) -> None:
    name = unique("my-lock")
    first, second = mysql_holdings(name, 2.2), mysql_holdings(name, None)
    assert first.name == lock_name(name, "beyond-locks")
    assert first.try_acquire() and first.owned()
    assert wait_timeout(first) == 3  # rounded up
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


def test_extend_adds_to_the_timeout_or_replaces_it(mysql_holdings: Holdings) -> None:
    held = mysql_holdings(unique("my-extend"), 60.0)
    assert held.try_acquire()
    assert held.extend(30.5) and held.timeout == 90.5
    assert wait_timeout(held) == 91
    assert held.extend(5.0, replace_ttl=True) and held.timeout == 5.0
    assert wait_timeout(held) == 5
    assert held.release()
    assert held.extend(5.0) is False


def test_a_lock_whose_session_ended_is_not_owned_nor_released(mysql_holdings: Holdings) -> None:
    name = unique("my-ended")
    held = mysql_holdings(name, 30.0)
    assert held.try_acquire()
    with connection.cursor() as cursor:
        cursor.execute("KILL %s", [held.connection.connection.thread_id()])
    went_with_its_session(held, lambda: mysql_holdings(name, 30.0))


# -- through lock() (moved from tests/locks/test_locks.py) --------------------------------


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
