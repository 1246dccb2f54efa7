"""Distributed locks on Redis, PostgreSQL and MySQL/MariaDB, every backend under one
contract: mutual exclusion across processes, expiry, extend (each backend's own ways:
tests/locks/test_redis.py, test_database.py)."""

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
    # before the first is taken: its timeout ends 0.3 s after this at the earliest, however
    # long the process stalls (taken after, a 0.3 s stall let the second in at once)
    started = time.monotonic()
    assert first.acquire()
    second = Lock(name, timeout=10, wait=30)
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
    # a timeout no stall of the process between the acquire and the extend outlasts (0.5 s
    # could: the lock was gone before the extend)
    timeout = 3.0
    held = Lock(name, timeout=timeout)
    taken = time.monotonic()
    assert held.acquire()
    assert held.extend(30.0)
    # real time: the backend times the lock; past the original timeout (the extension's is far)
    time.sleep(max(0.0, taken + timeout + 0.3 - time.monotonic()))
    assert held.owned()
    assert Lock(name).acquire() is False
    assert held.extend(10.0, replace_ttl=True)
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
