"""``job_lock``: the lock the sample's scheduled jobs run under.

It is :func:`idempotency.lock` (Redis, or PostgreSQL advisory locks, per the
``"default"`` alias of ``IDEMPOTENCY["LOCKS"]``) whenever that backend is usable. The
embedded default has neither Redis nor PostgreSQL: there, the database is one SQLite file, so
every process that can run the job lives on one host, and an exclusive
``flock`` on a lock file next to nothing else (the system temp directory, one
file per database and lock name) is a real cross-process lock. The operating
system frees it when its holder exits, however it exits, so it needs no
timeout. On systems without ``fcntl`` it degrades to a process-local lock.

With PostgreSQL but an unusable lock backend (say Redis without a Redis cache) there is
no fallback: the library's error surfaces, since several
hosts may be running the job.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connections

from idempotency import DatabaseStore, LockNotAcquired, get_store, lock
from idempotency.locks import PostgresLockBackend, RedisLockBackend, get_backend

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

_local_locks: dict[str, threading.Lock] = {}
_local_locks_guard = threading.Lock()


def distributed_lock_usable() -> bool:
    """Whether the default lock backend is one this deployment actually has (making it
    connects nowhere)."""
    backend = get_backend()
    if isinstance(backend, RedisLockBackend):
        if backend.location is not None:
            return True
        cache = settings.CACHES.get(backend.cache or "default", {})
        return str(cache.get("BACKEND", "")).startswith("django_redis.")
    if isinstance(backend, PostgresLockBackend):
        return connections[backend.alias].vendor == "postgresql"
    return True  # another backend: the library judges it itself


def _database() -> str:
    """The database the sample's records live in (its default store's; "default" where
    that store keeps them elsewhere)."""
    store = get_store()
    return store.using if isinstance(store, DatabaseStore) else "default"


def host_lock_usable() -> bool:
    """Whether every process that can run a job shares one host (a SQLite database)."""
    return connections[_database()].vendor == "sqlite"


@contextmanager
def job_lock(name: str, *, timeout: float) -> Iterator[None]:
    """Hold the lock ``name`` for the block, or raise :class:`~idempotency.LockNotAcquired`.

    Never waits: a job that finds its lock held is already running elsewhere.
    ``timeout`` frees a distributed lock whose holder hung or died; keep it above
    the job's longest run.
    """
    if distributed_lock_usable() or not host_lock_usable():
        with lock(name, timeout=timeout, wait=0):
            yield
        return
    logger.debug(
        "lock %r: the default lock backend %s is not available; using a host-local file "
        "lock (SQLite)",
        name,
        type(get_backend()).__name__,
    )
    with _host_lock(name):
        yield


def _lock_path(name: str) -> Path:
    database = str(connections[_database()].settings_dict["NAME"])
    digest = hashlib.sha256(f"{database}\x00{name}".encode()).hexdigest()[:24]
    return Path(tempfile.gettempdir()) / f"sample-job-lock-{digest}.lock"


@contextmanager
def _host_lock(name: str) -> Iterator[None]:
    if fcntl is None:  # pragma: no cover - not POSIX
        with _local_lock(name):
            yield
        return
    with _lock_path(name).open("a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockNotAcquired(name, 0.0) from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextmanager
def _local_lock(name: str) -> Iterator[None]:  # pragma: no cover - not POSIX
    with _local_locks_guard:
        local = _local_locks.setdefault(name, threading.Lock())
    if not local.acquire(blocking=False):
        raise LockNotAcquired(name, 0.0)
    try:
        yield
    finally:
        local.release()
