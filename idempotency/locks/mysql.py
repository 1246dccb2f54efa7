"""Locks on MySQL and MariaDB (``idempotency.locks.MySQLLockBackend``): ``GET_LOCK``
named locks.

A named lock belongs to the session that took it, so each lock is held on a dedicated
connection (outside Django's per-thread handler and any pool) and ends with that
session: :meth:`release` sends ``RELEASE_LOCK`` and closes it, and a holder that dies
closes it by dying. The timeout is the session's ``wait_timeout``: a holder silent for
that long is disconnected by the server, which frees the lock (whole seconds, rounded
up; as on PostgreSQL, any statement the holder sends, such as :meth:`owned`, starts that
idle time again). Names are hashed: MySQL takes at most 64 characters.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from django.db import DatabaseError

from idempotency.conf import Setting
from idempotency.locks.base import DatabaseLockBackend, Holding
from idempotency.utils.backends import KEY_PREFIX
from idempotency.utils.outages import outage_raises_unavailable

#: ``wait_timeout`` of a lock without a timeout: a year, MySQL's and MariaDB's largest.
_FOREVER = 31_536_000


def lock_name(name: str, prefix: str = KEY_PREFIX.default) -> str:
    """The ``GET_LOCK`` name of ``name``: the SHA-256 of the key prefix and ``name``, in 64
    characters (the server-wide namespace of named locks is shared by every database on
    it)."""
    return hashlib.sha256(f"{prefix}:lock:{name}".encode()).hexdigest()


class MySQLHolding(Holding):
    """A ``GET_LOCK`` lock held by the session of one dedicated connection."""

    def __init__(self, backend: MySQLLockBackend, name: str, timeout: float | None) -> None:
        self.backend = backend
        self.name = lock_name(name, backend.key_prefix)
        self.timeout = timeout
        self.connection: Any = None
        self.held = False

    def _scalar(self, sql: str, params: list[Any]) -> Any:
        if self.connection is None:
            connection = self.backend.new_connection()
            connection.ensure_connection()
            self.connection = connection
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        return row[0] if row else None

    @staticmethod
    def _seconds(timeout: float | None) -> int:
        return _FOREVER if timeout is None else min(_FOREVER, max(1, math.ceil(timeout)))

    @outage_raises_unavailable("database", keyed=False)
    def try_acquire(self) -> bool:
        # 0: do not wait (Lock.acquire polls with backoff, so a waiter pins no lock wait)
        self.held = self._scalar("SELECT GET_LOCK(%s, 0)", [self.name]) == 1
        if self.held:
            self._scalar("SET SESSION wait_timeout = %s", [self._seconds(self.timeout)])
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

    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        if not self.owned():
            return False
        if self.timeout is None and not replace_ttl:
            return True
        # owned() just sent a statement: the session's idle time starts again now
        seconds = additional if replace_ttl else (self.timeout or 0.0) + additional
        try:
            self._scalar("SET SESSION wait_timeout = %s", [self._seconds(seconds)])
        except DatabaseError:
            return False
        self.timeout = seconds
        return True

    def owned(self) -> bool:
        if not self.held or self.connection is None:
            return False
        try:
            return bool(self._scalar("SELECT IS_USED_LOCK(%s) = CONNECTION_ID()", [self.name]))
        except DatabaseError:
            return False

    def abandon(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            with contextlib.suppress(DatabaseError):  # already ended by the server
                connection.close()


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
