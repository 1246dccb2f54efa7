"""Locks on PostgreSQL (``idempotency.locks.PostgresLockBackend``): transaction advisory
locks."""

from __future__ import annotations

import contextlib
import hashlib
import time
from typing import Any

from django.db import DatabaseError

from idempotency.locks.base import DatabaseLockBackend, Holding
from idempotency.utils.outages import outage_raises_unavailable


def advisory_key(name: str) -> int:
    """The signed 64-bit advisory-lock key of ``name`` (the first 8 bytes of its SHA-256)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


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


class PostgresLockBackend(DatabaseLockBackend):
    """Transaction advisory locks of the PostgreSQL database its ``database`` option names."""

    vendor = "postgresql"
    name = "postgres"

    def holding(self, name: str, timeout: float | None) -> Holding:
        return PostgresHolding(self, name, timeout)
