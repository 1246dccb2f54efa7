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

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import logging
import secrets
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections

from idempotency import signals
from idempotency.backoff import Backoff
from idempotency.conf import idempotency_settings
from idempotency.exceptions import LockNotAcquired, StoreUnavailable
from idempotency.outages import guard

__all__ = [
    "Lock",
    "LockBackend",
    "PostgresLockBackend",
    "RedisLockBackend",
    "advisory_key",
    "lock",
]

logger = logging.getLogger("idempotency.locks")

F = TypeVar("F", bound=Callable[..., Any])

#: Longest pause between two attempts while waiting (seconds).
MAX_POLL_INTERVAL = 0.1
_FIRST_POLL_INTERVAL = 0.005
_DEFAULT: Any = object()


def advisory_key(name: str) -> int:
    """The signed 64-bit advisory-lock key of ``name`` (the first 8 bytes of its SHA-256)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class Holding:
    """One lock taken (or being tried) by one :class:`Lock`: what its backend needs."""

    def try_acquire(self) -> bool:
        raise NotImplementedError

    def release(self) -> bool:
        raise NotImplementedError

    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        raise NotImplementedError

    def owned(self) -> bool:
        raise NotImplementedError

    def abandon(self) -> None:
        """Give up after failed attempts (free what trying needed)."""


class LockBackend:
    """Makes :class:`Holding` objects for lock names."""

    def holding(self, name: str, timeout: float | None) -> Holding:
        raise NotImplementedError


# -- Redis -------------------------------------------------------------------------------

REDIS_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

#: ARGV[1] owner token, ARGV[2] milliseconds, ARGV[3] '1' to replace the TTL.
REDIS_EXTEND = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local add = tonumber(ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
if ARGV[3] == '1' or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], add)
else
  redis.call('PEXPIRE', KEYS[1], ttl + add)
end
return 1
"""


class RedisHolding(Holding):
    def __init__(self, client: Any, key: str, timeout: float | None) -> None:
        self.client = client
        self.key = key
        self.timeout = timeout
        self.token = secrets.token_hex(16)

    @guard("redis", keyed=False)
    def try_acquire(self) -> bool:
        if self.timeout is None:
            return bool(self.client.set(self.key, self.token, nx=True))
        px = max(1, int(self.timeout * 1000))
        return bool(self.client.set(self.key, self.token, nx=True, px=px))

    @guard("redis", keyed=False)
    def release(self) -> bool:
        return bool(self.client.register_script(REDIS_RELEASE)(keys=[self.key], args=[self.token]))

    @guard("redis", keyed=False)
    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        extended = self.client.register_script(REDIS_EXTEND)(
            keys=[self.key],
            args=[self.token, max(1, int(additional * 1000)), "1" if replace_ttl else "0"],
        )
        return bool(extended)

    @guard("redis", keyed=False)
    def owned(self) -> bool:
        value = self.client.get(self.key)
        if isinstance(value, bytes):
            value = value.decode()
        return bool(value == self.token)


class RedisLockBackend(LockBackend):
    """Locks as Redis keys on the django-redis connection of ``alias`` (``REDIS_ALIAS``)."""

    def __init__(self, alias: str | None = None) -> None:
        self.alias = alias

    @property
    def client(self) -> Any:
        from django_redis import get_redis_connection

        return get_redis_connection(self.alias or idempotency_settings.REDIS_ALIAS)

    def key(self, name: str) -> str:
        digest = hashlib.sha256(name.encode()).hexdigest()[:40]
        return f"{idempotency_settings.KEY_PREFIX}:lock:{{{digest}}}"

    def holding(self, name: str, timeout: float | None) -> Holding:
        return RedisHolding(self.client, self.key(name), timeout)


# -- PostgreSQL --------------------------------------------------------------------------


class PostgresHolding(Holding):
    """A transaction advisory lock on a dedicated, unpooled connection in an open transaction."""

    def __init__(self, backend: PostgresLockBackend, name: str, timeout: float | None) -> None:
        self.backend = backend
        self.name = name
        self.key = advisory_key(name)
        self.timeout = timeout
        self.connection: Any = None
        self.held = False
        self.deadline: float | None = None

    def _connection(self) -> Any:
        if self.connection is None:
            connection = self.backend.new_connection()
            connection.ensure_connection()
            # every statement runs in a transaction, begun implicitly, ended by rollback()
            connection.set_autocommit(False)
            self.connection = connection
        return self.connection

    def _scalar(self, sql: str, params: list[Any]) -> Any:
        with self._connection().cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        return row[0] if row else None

    @staticmethod
    def _idle_ms(seconds: float | None) -> str:
        return "0" if seconds is None else str(max(1, int(seconds * 1000)))

    @guard("database", keyed=False)
    def try_acquire(self) -> bool:
        # one statement: the timeout is armed exactly when the lock is taken, and only for
        # this transaction (SET LOCAL), so nothing outlives it on a pooled server connection
        taken = self._scalar(
            "SELECT CASE WHEN pg_try_advisory_xact_lock(%s::bigint)"
            " THEN set_config('idle_in_transaction_session_timeout', %s, true) IS NOT NULL"
            " ELSE false END",
            [self.key, self._idle_ms(self.timeout)],
        )
        self.held = bool(taken)
        if self.held:
            if self.timeout is not None:
                self.deadline = time.monotonic() + self.timeout
        else:
            # end the attempt's transaction: a waiting lock pins no server connection
            self.connection.rollback()
        return self.held

    def release(self) -> bool:
        try:
            # still ours? (False when the timeout ended the transaction, or the link broke)
            return self.owned()
        finally:
            self.held = False
            self.abandon()  # ends the transaction, which frees the lock

    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        if not self.owned():
            return False
        if self.timeout is None and not replace_ttl:
            return True
        now = time.monotonic()
        remaining = 0.0 if replace_ttl or self.deadline is None else self.deadline - now
        seconds = max(0.0, remaining) + additional
        try:
            self._scalar(
                "SELECT set_config('idle_in_transaction_session_timeout', %s, true)",
                [self._idle_ms(seconds)],
            )
        except DatabaseError:
            return False
        self.timeout = seconds
        self.deadline = now + seconds
        return True

    def owned(self) -> bool:
        if not self.held or self.connection is None:
            return False
        high, low = (self.key >> 32) & 0xFFFFFFFF, self.key & 0xFFFFFFFF
        try:
            return bool(
                self._scalar(
                    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
                    " AND pid = pg_backend_pid() AND granted AND objsubid = 1"
                    " AND classid::bigint = %s AND objid::bigint = %s)",
                    [high, low],
                )
            )
        except DatabaseError:
            return False

    def abandon(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            with contextlib.suppress(DatabaseError):  # already ended by the server
                connection.rollback()
            with contextlib.suppress(DatabaseError):
                connection.close()


class PostgresLockBackend(LockBackend):
    """Transaction advisory locks of the PostgreSQL database ``using`` (``DATABASE_ALIAS``)."""

    def __init__(self, using: str | None = None) -> None:
        self.using = using

    @property
    def alias(self) -> str:
        return self.using or str(idempotency_settings.DATABASE_ALIAS)

    def new_connection(self) -> Any:
        """A fresh connection of ``alias`` outside Django's per-thread handler and any pool."""
        template = connections[self.alias]
        if template.vendor != "postgresql":
            raise ImproperlyConfigured(
                f"The postgres lock backend needs a PostgreSQL database; {self.alias!r} "
                f"is {template.vendor}. Use LOCK_BACKEND='redis'."
            )
        settings_dict = copy.deepcopy(template.settings_dict)
        options = dict(settings_dict.get("OPTIONS") or {})
        options.pop("pool", None)
        settings_dict["OPTIONS"] = options
        connection = type(template)(settings_dict, self.alias)
        # the lock may be released from another thread than the one that took it
        connection.inc_thread_sharing()
        return connection

    def holding(self, name: str, timeout: float | None) -> Holding:
        return PostgresHolding(self, name, timeout)


# -- the lock ----------------------------------------------------------------------------


def get_backend(backend: str | LockBackend | None = None) -> LockBackend:
    if isinstance(backend, LockBackend):
        return backend
    name = backend or idempotency_settings.LOCK_BACKEND
    if name == "redis":
        return RedisLockBackend()
    if name in {"postgres", "postgresql"}:
        return PostgresLockBackend()
    raise ImproperlyConfigured(
        f"Unknown lock backend {name!r}: use 'redis', 'postgres' or a LockBackend instance"
    )


class Lock:
    """A named distributed lock; see the module documentation.

    One object holds the lock at most once at a time; use a new one (``lock(...)``)
    per critical section. As a decorator it takes a new lock for every call.
    """

    def __init__(
        self,
        name: str,
        *,
        timeout: float | None = 30.0,
        wait: float | None = 0.0,
        backend: str | LockBackend | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("A lock needs a non-empty name")
        if timeout is not None and timeout <= 0:
            raise ValueError("A lock's timeout must be positive (or None)")
        self.name = name
        self.timeout = timeout
        self.wait = wait
        self.backend = backend
        self._holding: Holding | None = None

    def __repr__(self) -> str:
        state = "held" if self._holding is not None else "free"
        return f"<Lock {self.name!r} {state}>"

    def copy(self) -> Lock:
        return Lock(self.name, timeout=self.timeout, wait=self.wait, backend=self.backend)

    @property
    def held(self) -> bool:
        """Whether this object took the lock and has not released it (no server check)."""
        return self._holding is not None

    def acquire(self, *, wait: float | None = _DEFAULT) -> bool:
        """Take the lock, waiting up to ``wait`` seconds (default: the lock's ``wait``).

        True when taken, False when it stayed held by someone else.
        """
        if self._holding is not None:
            raise RuntimeError(f"{self!r} is already held by this object (locks are not reentrant)")
        wait = self.wait if wait is _DEFAULT else wait
        holding = get_backend(self.backend).holding(self.name, self.timeout)
        backoff = Backoff(wait, first=_FIRST_POLL_INTERVAL, cap=MAX_POLL_INTERVAL, jitter=True)
        try:
            while True:
                if holding.try_acquire():
                    self._holding = holding
                    return True
                if not backoff.pause():
                    holding.abandon()
                    return False
        except BaseException:
            holding.abandon()
            raise

    def release(self) -> bool:
        """Free the lock if this object still owns it.

        False (and a warning) when it does not: its timeout passed and the lock
        expired, possibly taken by another owner since, whose lock stays untouched.
        """
        holding, self._holding = self._holding, None
        if holding is None:
            return False
        try:
            released = holding.release()
        except StoreUnavailable:
            # the backend is gone: the lock ends with its timeout (Redis) or its session
            logger.warning("lock %r could not be released: its backend is unreachable", self.name)
            return False
        if not released:
            logger.warning(
                "lock %r was no longer held at release: its timeout (%s s) passed before the "
                "critical section ended, so another owner may have run concurrently",
                self.name,
                self.timeout,
            )
        return released

    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        """Add ``additional`` seconds to the lock's remaining time (or set it, ``replace_ttl``).

        False (and a warning) when this object no longer owns the lock.
        """
        if additional <= 0:
            raise ValueError("extend() needs a positive number of seconds")
        holding = self._holding
        if holding is None:
            return False
        extended = holding.extend(additional, replace_ttl=replace_ttl)
        if extended and self.timeout is not None:
            self.timeout = additional if replace_ttl else self.timeout + additional
        if not extended:
            logger.warning("lock %r could not be extended: it is no longer held", self.name)
        return extended

    def owned(self) -> bool:
        """Whether this object still owns the lock (asks the server)."""
        holding = self._holding
        return holding is not None and holding.owned()

    def _not_acquired(self) -> LockNotAcquired:
        signals.lock_not_acquired.send(sender=type(self), name=self.name)
        return LockNotAcquired(self.name, 0.0 if self.wait is None else float(self.wait))

    def __enter__(self) -> Lock:
        if not self.acquire():
            raise self._not_acquired()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    async def __aenter__(self) -> Lock:
        acquired = await sync_to_async(self.acquire)()
        if not acquired:
            raise self._not_acquired()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await sync_to_async(self.release)()

    def __call__(self, func: F) -> F:
        """Decorate ``func`` (sync or async): every call runs under a new lock of this name."""
        if not callable(func):
            raise TypeError(f"lock() decorates callables, got {func!r}")
        if iscoroutinefunction(func):

            async def async_locked(*args: Any, **kwargs: Any) -> Any:
                async with self.copy():
                    return await func(*args, **kwargs)

            wrapped: Any = functools.wraps(func)(async_locked)
            markcoroutinefunction(wrapped)
        else:

            def locked(*args: Any, **kwargs: Any) -> Any:
                with self.copy():
                    return func(*args, **kwargs)

            wrapped = functools.wraps(func)(locked)
        return cast(F, wrapped)


def lock(
    name: str,
    *,
    timeout: float | None = 30.0,
    wait: float | None = 0.0,
    backend: str | LockBackend | None = None,
) -> Lock:
    """A distributed lock named ``name``: ``with lock(...)``, ``async with`` or ``@lock(...)``.

    Raises :class:`~idempotency.exceptions.LockNotAcquired` on entry when the lock
    stays held by someone else for ``wait`` seconds. See the module documentation.
    """
    return Lock(name, timeout=timeout, wait=wait, backend=backend)
