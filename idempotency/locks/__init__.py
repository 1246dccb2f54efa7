"""Distributed locks on Redis or PostgreSQL: ``lock(name)`` as a context manager or decorator.

A lock makes one critical section run in one place at a time (a nightly job
that must not overlap itself, a balance recomputation); it does not make work
idempotent. Prefer a unique constraint or an idempotency key where one fits::

    from idempotency import lock

    with lock(f"settle:{merchant_id}", timeout=60, wait=5):
        settle(merchant_id)          # LockNotAcquired when still held after 5 s

    @lock("nightly-report", timeout=600)
    def nightly_report() -> None: ...

``timeout``
    Seconds after which the lock frees itself when its holder never releases it
    (a crashed or hung process). Keep it above the critical section's longest
    run, or call :meth:`Lock.extend` from it. ``None``: only a release frees it.
``wait``
    Seconds to wait for a held lock, polling with jittered backoff; ``0`` (the
    default) tries once, ``None`` waits forever. Then
    :class:`~idempotency.exceptions.LockNotAcquired`.
``backend``
    ``"redis"`` or ``"postgres"`` (default: the ``LOCK_BACKEND`` setting), or a
    backend instance such as ``PostgresLockBackend(using="direct")``.

A lock belongs to the :class:`Lock` object that took it, proven by a random
owner token. Releasing (or extending) a lock whose timeout passed, and which
another process may have taken since, never touches the new owner's lock: it
returns False and logs a warning. Locks are not reentrant.

**Redis** (``REDIS_ALIAS``): ``SET key token NX PX timeout``; release and extend
are single compare-and-delete / compare-and-pexpire Lua scripts. The key
carries a hash tag. Redis Cluster is fine; Redis failover can lose a lock that
was not yet replicated (as any single-instance Redis lock).

**PostgreSQL** (database alias ``DATABASE_ALIAS``): a transaction-level advisory
lock, ``pg_try_advisory_xact_lock(<64 bits of SHA-256(name)>)``, taken inside a
transaction that a **dedicated connection** keeps open while the lock is held;
releasing ends that transaction (and closes the connection). The lock never uses
Django's per-thread connection (which Django may close or hand back to a pool at
the end of a request) nor a pooled one. Because the lock lives and dies with one
transaction, it also works behind PgBouncer in transaction pooling mode, which
keeps a client's server connection for exactly the length of a transaction (a
session-level lock there would stay with the server connection and pass to its
next client). Nothing is set for the session: ``timeout`` is enforced with
``SET LOCAL idle_in_transaction_session_timeout``, so the server ends the
transaction, and frees the lock, ``timeout`` seconds after the last acquire or
extend. A held lock keeps one server connection busy (behind PgBouncer, one of the
pool's) but holds back no vacuum: the transaction writes nothing and, between
statements at READ COMMITTED, keeps no snapshot.
"""

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
