"""Distributed locks on Redis, PostgreSQL or MySQL/MariaDB: ``lock(name)`` as a context
manager or decorator (how to use them and how each backend works: docs/howto/locks.md)."""

from idempotency.locks.base import Holding, Lock, LockBackend, get_backend, lock, lock_backends
from idempotency.locks.database import (
    MySQLLockBackend,
    PostgresLockBackend,
    advisory_key,
    lock_name,
)
from idempotency.locks.redis import RedisLockBackend

__all__ = [
    "Holding",
    "Lock",
    "LockBackend",
    "MySQLLockBackend",
    "PostgresLockBackend",
    "RedisLockBackend",
    "advisory_key",
    "get_backend",
    "lock",
    "lock_backends",
    "lock_name",
]
