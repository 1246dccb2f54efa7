"""Distributed locks on Redis, PostgreSQL and MySQL/MariaDB: mutual exclusion across
processes, expiry, extend."""

from __future__ import annotations

import copy
import logging
import multiprocessing
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings

from idempotency import lock
from idempotency.exceptions import LockNotAcquired
from idempotency.locks import (
    Lock,
    MySQLLockBackend,
    PostgresLockBackend,
    RedisLockBackend,
    advisory_key,
    lock_name,
)
from tests.support.counting import unique
from tests.support.lock_worker import contend
from tests.support.stores import LOCK_BACKENDS, entry, locks_using

BACKENDS = [
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", id="mysql", marks=pytest.mark.mysql),
]

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each lock backend, as the aliases "default" and its short name."""
    path = LOCK_BACKENDS[request.param]
    locks = {"default": entry(path), request.param: entry(path)}
    with override_settings(IDEMPOTENCY={"LOCKS": locks}):
        yield request.param


def child_settings(backend: str) -> dict[str, Any]:
    """A minimal Django configuration of the same Redis and test database, the lock
    backend ``backend`` as the alias of the same name."""
    database = copy.deepcopy(connection.settings_dict)
    if connection.vendor not in {"postgresql", "mysql"}:
        database = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    prefix = {} if backend == "postgres" else {"key_prefix": "beyond-locks"}
    return {
        "DATABASES": {"default": database},
        "CACHES": copy.deepcopy(settings.CACHES),
        "INSTALLED_APPS": [],
        "USE_TZ": True,
        "IDEMPOTENCY": {
            "LOCKS": {
                "default": entry(LOCK_BACKENDS[backend]),
                # PostgreSQL's advisory locks take no key prefix (a lock is a number)
                backend: entry(LOCK_BACKENDS[backend], **prefix),
            }
        },
    }


def test_ten_processes_never_hold_the_lock_together(backend: str) -> None:
    processes, rounds = 10, 5
    ctx = multiprocessing.get_context("spawn")
    shared = {
        "holders": ctx.Value("i", 0),
        "max_holders": ctx.Value("i", 0),
        "acquisitions": ctx.Value("i", 0),
        "counter": ctx.Value("i", 0, lock=False),  # unsynchronised on purpose
        "ready": ctx.Semaphore(0),
        "go": ctx.Event(),
    }
    name = unique("critical")
    workers = [
        ctx.Process(
            target=contend, args=(backend, child_settings(backend), name, rounds, 0.01, shared)
        )
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        for _ in workers:
            assert shared["ready"].acquire(timeout=60), "a lock process did not start"
        shared["go"].set()
        for worker in workers:
            worker.join(90)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
    assert [worker.exitcode for worker in workers] == [0] * processes
    assert shared["max_holders"].value == 1
    assert shared["acquisitions"].value == processes * rounds
    assert shared["counter"].value == processes * rounds  # no lost update


def test_lock_not_acquired_when_the_wait_runs_out(backend: str) -> None:
    name = unique("busy")
    with lock(name, timeout=10):
        started = time.monotonic()
        with pytest.raises(LockNotAcquired) as caught, lock(name, wait=0.3):
            pass
        assert time.monotonic() - started >= 0.3
        assert caught.value.name == name and caught.value.waited == 0.3
        assert Lock(name).acquire() is False
    # free again
    with lock(name) as held:
        assert held.owned()
    assert not held.owned() and not held.held


def test_release_after_expiry_leaves_the_new_owners_lock(
    backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="idempotency.locks")
    name = unique("expiring")
    first = Lock(name, timeout=0.3)
    assert first.acquire()
    second = Lock(name, timeout=10, wait=5)
    started = time.monotonic()
    assert second.acquire()  # once the first one's timeout has passed
    assert time.monotonic() - started >= 0.2
    assert not first.owned()
    assert first.release() is False
    assert "no longer held" in caplog.text
    assert second.owned()
    assert Lock(name).acquire() is False  # the new owner's lock is intact
    assert second.release() is True


def test_extend_keeps_the_lock(backend: str) -> None:
    name = unique("long")
    held = Lock(name, timeout=0.5)
    assert held.acquire()
    assert held.extend(30.0)
    # real time: the backend times the lock; past the original timeout (the extension's is far)
    time.sleep(0.8)
    assert held.owned()
    assert Lock(name).acquire() is False
    assert held.extend(1.0, replace_ttl=True)
    assert held.release()
    assert held.extend(1.0) is False  # not held any more


def test_decorator_takes_a_new_lock_per_call(backend: str) -> None:
    name = unique("job")
    calls: list[int] = []

    @lock(name, timeout=10)
    def job(n: int) -> int:
        calls.append(n)
        with pytest.raises(LockNotAcquired):  # not reentrant, and held right now
            nested()
        return n * 2

    @lock(name)
    def nested() -> None:
        raise AssertionError("must not run while job holds the lock")

    assert job(1) == 2
    assert job(2) == 4
    assert calls == [1, 2]

    @lock(name, timeout=10)
    async def async_job() -> str:
        assert await sync_to_async(Lock(name).acquire)() is False
        return "done"

    assert async_to_sync(async_job)() == "done"
    again = Lock(name)
    assert again.acquire()  # released after every call
    assert again.release()


@pytest.mark.redis
def test_redis_lock_key_and_owner_token() -> None:
    from idempotency.utils.redis_clients import RedisConnector

    name = unique("keyed")
    client = RedisConnector(cache="default").client
    with lock(name, timeout=5, backend=RedisLockBackend()) as held:
        key = RedisLockBackend().key(name)
        assert key.count("{") == 1 and key.endswith("}")  # a hash tag
        assert 0 < client.pttl(key) <= 5000
        token = client.get(key)
        client.set(key, b"someone-else")  # as if it expired and was taken
        assert held.release() is False
        assert client.get(key) == b"someone-else"
        assert token != b"someone-else"
    client.delete(key)
    with lock(name, timeout=None, backend=RedisLockBackend()):
        assert client.pttl(RedisLockBackend().key(name)) == -1


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


def test_backend_configuration() -> None:
    with (
        override_settings(IDEMPOTENCY=locks_using("zookeeper")),
        pytest.raises(ImproperlyConfigured),
    ):
        Lock("x").acquire()
    with pytest.raises(ValueError):
        lock("")
    with pytest.raises(ValueError):
        lock("x", timeout=0)
    if connection.vendor != "postgresql":
        with pytest.raises(ImproperlyConfigured):
            Lock("x", backend=PostgresLockBackend()).acquire()
    if connection.vendor != "mysql":
        with pytest.raises(ImproperlyConfigured):
            Lock("x", backend=MySQLLockBackend()).acquire()
