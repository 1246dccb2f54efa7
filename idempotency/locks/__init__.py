"""Distributed locks on Redis or PostgreSQL: ``lock(name)`` as a context manager or decorator
(how to use them and how each backend works: docs/howto/locks.md)."""

from idempotency.locks.base import Holding, LockBackend
from idempotency.locks.locking import Lock, get_backend, lock
from idempotency.locks.postgres import PostgresLockBackend, advisory_key
from idempotency.locks.redis import RedisLockBackend

__all__ = [
    "Holding",
    "Lock",
    "LockBackend",
    "PostgresLockBackend",
    "RedisLockBackend",
    "advisory_key",
    "get_backend",
    "lock",
]
