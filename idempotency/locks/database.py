"""Locks in database sessions: PostgreSQL's transaction advisory locks
(``idempotency.locks.PostgresLockBackend``) and MySQL's and MariaDB's ``GET_LOCK`` named
locks (``idempotency.locks.MySQLLockBackend``).

Either lock belongs to the session that took it, so each is held on a dedicated
connection of its own (:meth:`DatabaseLockBackend.new_connection`: outside Django's
per-thread handler and any pool), and ends with that session: a holder that dies frees it
by dying. Its timeout is how long the session may stay idle before the server ends it
(``idle_in_transaction_session_timeout`` on PostgreSQL, ``wait_timeout`` on MySQL and
MariaDB); any statement the holder sends, such as asking whether it still owns the lock,
starts that idle time again.
"""

from __future__ import annotations

import abc
import contextlib
import copy
import hashlib
import math
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections

from idempotency.conf import Setting
from idempotency.locks.base import Holding, LockBackend
from idempotency.utils.backends import KEY_PREFIX
from idempotency.utils.outages import outage_raises_unavailable


class DatabaseLockBackend(LockBackend):
    """A lock backend whose locks live in the sessions of its ``database``, each on a
    connection of its own (:meth:`new_connection`)."""

    #: ``connection.vendor`` of the database these locks need, and the backend's name.
    vendor = ""
    name = ""
    #: ``OPTIONS`` of a database lock backend (:mod:`idempotency.utils.backends`).
    options: ClassVar[Mapping[str, Setting]] = {
        "database": Setting("default", "Database alias whose sessions hold the locks.", "database"),
    }

    def __init__(self, *, database: str = "default") -> None:
        #: The database alias whose sessions hold the locks.
        self.alias = database

    def new_connection(self) -> Any:
        """A fresh connection of ``alias`` outside Django's per-thread handler and any pool,
        for a lock held on its session."""
        template = connections[self.alias]
        if template.vendor != self.vendor:
            raise ImproperlyConfigured(
                f"The {self.name} lock backend needs a {self.vendor} database; {self.alias!r} "
                f"is {template.vendor}. Configure IDEMPOTENCY['LOCKS'] with RedisLockBackend."
            )
        settings_dict = copy.deepcopy(template.settings_dict)
        settings_dict["OPTIONS"] = {
            k: v for k, v in (settings_dict.get("OPTIONS") or {}).items() if k != "pool"
        }
        connection = type(template)(settings_dict, self.alias)
        # the lock may be released from another thread than the one that took it
        connection.inc_thread_sharing()
        return connection


class DatabaseHolding(Holding):
    """A lock held by the session of one dedicated connection, opened by the first
    statement and closed by :meth:`abandon` (and so by :meth:`release`).

    Each vendor says how its session holds the lock (:meth:`try_acquire`, :meth:`release`),
    asks whether it still does (:meth:`_holds`), arms its timeout (:meth:`_arm`) and tells
    how much of it is left (:meth:`_remaining`).
    """

    def __init__(self, backend: DatabaseLockBackend, timeout: float | None) -> None:
        self.backend = backend
        self.timeout = timeout
        self.connection: Any = None
        self.held = False

    def _connect(self) -> Any:
        """A new connection for this holding's session."""
        connection = self.backend.new_connection()
        connection.ensure_connection()
        return connection

    def _scalar(self, sql: str, params: list[Any]) -> Any:
        """The first column of the first row ``sql`` returns in this holding's session."""
        if self.connection is None:
            self.connection = self._connect()
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        return row[0] if row else None

    @abc.abstractmethod
    def _holds(self) -> bool:
        """Whether this holding's session holds the lock (one statement)."""

    @abc.abstractmethod
    def _arm(self, seconds: float | None) -> None:
        """Have the server end the session after ``seconds`` of silence (None: never)."""

    @abc.abstractmethod
    def _remaining(self) -> float:
        """Seconds left of the lock's timeout."""

    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        if not self.owned():
            return False
        if self.timeout is None and not replace_ttl:
            return True  # no timeout to move: extending only checks ownership
        seconds = additional if replace_ttl else self._remaining() + additional
        try:
            self._arm(seconds)
        except DatabaseError:
            return False
        self.timeout = seconds
        return True

    def owned(self) -> bool:
        if not self.held or self.connection is None:
            return False
        try:
            return self._holds()
        except DatabaseError:
            return False  # the session ended (its timeout, or a broken link): so did the lock

    def abandon(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            with contextlib.suppress(DatabaseError):  # already ended by the server
                connection.close()


# -- PostgreSQL: transaction advisory locks ----------------------------------------------


def advisory_key(name: str) -> int:
    """The signed 64-bit advisory-lock key of ``name`` (the first 8 bytes of its SHA-256)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class PostgresHolding(DatabaseHolding):
    """A transaction advisory lock on a dedicated connection in an open transaction (which
    works behind PgBouncer's transaction pooling)."""

    def __init__(self, backend: PostgresLockBackend, name: str, timeout: float | None) -> None:
        super().__init__(backend, timeout)
        self.name = name
        self.key = advisory_key(name)
        self.deadline: float | None = None

    def _connect(self) -> Any:
        connection = super()._connect()
        # every statement runs in a transaction, begun implicitly, ended by rollback()
        connection.set_autocommit(False)
        return connection

    @staticmethod
    def _idle_ms(seconds: float | None) -> str:
        return "0" if seconds is None else str(max(1, int(seconds * 1000)))

    @outage_raises_unavailable("database", keyed=False)
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
            self.deadline = None if self.timeout is None else time.monotonic() + self.timeout
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

    def _holds(self) -> bool:
        high, low = (self.key >> 32) & 0xFFFFFFFF, self.key & 0xFFFFFFFF
        return bool(
            self._scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
                " AND pid = pg_backend_pid() AND granted AND objsubid = 1"
                " AND classid::bigint = %s AND objid::bigint = %s)",
                [high, low],
            )
        )

    def _arm(self, seconds: float | None) -> None:
        now = time.monotonic()
        self._scalar(
            "SELECT set_config('idle_in_transaction_session_timeout', %s, true)",
            [self._idle_ms(seconds)],
        )
        self.deadline = None if seconds is None else now + seconds

    def _remaining(self) -> float:
        # the idle timeout runs between statements, but the deadline is what was promised
        return 0.0 if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def abandon(self) -> None:
        if self.connection is not None:
            with contextlib.suppress(DatabaseError):  # already ended by the server
                self.connection.rollback()
        super().abandon()


class PostgresLockBackend(DatabaseLockBackend):
    """Transaction advisory locks of the PostgreSQL database its ``database`` option names."""

    vendor = "postgresql"
    name = "postgres"

    def holding(self, name: str, timeout: float | None) -> Holding:
        return PostgresHolding(self, name, timeout)


# -- MySQL and MariaDB: GET_LOCK named locks ---------------------------------------------

#: ``wait_timeout`` of a lock without a timeout: a year, MySQL's and MariaDB's largest.
_FOREVER = 31_536_000


def lock_name(name: str, prefix: str = KEY_PREFIX.default) -> str:
    """The ``GET_LOCK`` name of ``name``: the SHA-256 of the key prefix and ``name``, in 64
    characters (MySQL takes at most 64, and the server-wide namespace of named locks is
    shared by every database on it)."""
    return hashlib.sha256(f"{prefix}:lock:{name}".encode()).hexdigest()


class MySQLHolding(DatabaseHolding):
    """A ``GET_LOCK`` lock of one dedicated session, whose ``wait_timeout`` is the lock's
    timeout (whole seconds, rounded up): a holder silent for that long is disconnected by
    the server, which frees the lock."""

    def __init__(self, backend: MySQLLockBackend, name: str, timeout: float | None) -> None:
        super().__init__(backend, timeout)
        self.name = lock_name(name, backend.key_prefix)

    @staticmethod
    def _seconds(timeout: float | None) -> int:
        return _FOREVER if timeout is None else min(_FOREVER, max(1, math.ceil(timeout)))

    @outage_raises_unavailable("database", keyed=False)
    def try_acquire(self) -> bool:
        # 0: do not wait (Lock.acquire polls with backoff, so a waiter pins no lock wait)
        self.held = self._scalar("SELECT GET_LOCK(%s, 0)", [self.name]) == 1
        if self.held:
            self._arm(self.timeout)
        return self.held

    def release(self) -> bool:
        try:
            if not self.held or self.connection is None:
                return False
            # 1: released by its holder; 0: held by another session; NULL: not held at all
            return bool(self._scalar("SELECT RELEASE_LOCK(%s)", [self.name]) == 1)
        except DatabaseError:
            return False  # the session ended (the timeout): the lock went with it
        finally:
            self.held = False
            self.abandon()

    def _holds(self) -> bool:
        return bool(self._scalar("SELECT IS_USED_LOCK(%s) = CONNECTION_ID()", [self.name]))

    def _arm(self, seconds: float | None) -> None:
        self._scalar("SET SESSION wait_timeout = %s", [self._seconds(seconds)])

    def _remaining(self) -> float:
        # extend() asked owned() first, a statement: the session's idle time started again
        return self.timeout or 0.0


class MySQLLockBackend(DatabaseLockBackend):
    """``GET_LOCK`` locks of the MySQL or MariaDB database its ``database`` option names."""

    vendor = "mysql"
    name = "mysql"
    #: ``OPTIONS`` of MySQL locks (:mod:`idempotency.utils.backends`).
    options: ClassVar[Mapping[str, Setting]] = {
        **DatabaseLockBackend.options,
        "key_prefix": KEY_PREFIX,
    }

    def __init__(self, *, database: str = "default", key_prefix: str = KEY_PREFIX.default) -> None:
        super().__init__(database=database)
        self.key_prefix = key_prefix

    def holding(self, name: str, timeout: float | None) -> Holding:
        return MySQLHolding(self, name, timeout)
