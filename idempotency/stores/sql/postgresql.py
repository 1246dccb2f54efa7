"""PostgreSQL's SQL in :class:`~idempotency.stores.database.DatabaseStore`: the server's clock, the
claim as ``INSERT … ON CONFLICT … RETURNING`` (which SQLite runs too, :mod:`.sqlite`),
``lock_timeout`` and the record quota's counter.

First ``DO NOTHING`` (:func:`fresh`), then the upsert that replaces an expired record or
takes an abandoned lease over (:func:`upsert`), each ``RETURNING`` what it did.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.backends.base.base import BaseDatabaseWrapper

#: The server's clock: every application server judges leases and expiry by it.
NOW = "statement_timestamp()"
#: Swap the transaction's ``lock_timeout`` for ``%s``, answering the previous one.
SWAP_LOCK_TIMEOUT = "SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)"
#: Set the transaction's ``lock_timeout`` to ``%s``.
SET_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %s, true)"


def later(name: str) -> str:
    """SQL of "now plus parameter ``name``'s seconds"."""
    return f"({NOW} + %({name})s * interval '1 second')"


def epoch(column: str) -> str:
    """SQL of a datetime as seconds since the epoch (a float loaded in C: a
    ``timestamptz`` goes through Django's loader in Python)."""
    return f"date_part('epoch', {column})"


def _conflict(
    connection: BaseDatabaseWrapper, table: str, columns: Sequence[str], now: str, *, claim: bool
) -> str:
    """``ON CONFLICT``: replace only an expired record (or, for a claim, an in-progress one
    of the same request whose lease ran out: a takeover, which keeps the previous owner's
    recovery point and the record's created_at, so the new owner can tell)."""
    qn = connection.ops.quote_name
    t = qn(table)
    condition = f"{t}.{qn('expires_at')} <= {now}"
    kept: tuple[str, ...] = ()
    if claim:
        condition += (
            f" OR ({t}.{qn('state')} = 'in_progress' AND {t}.{qn('lease_expires_at')} <= {now}"
            f" AND {t}.{qn('fingerprint')} = excluded.{qn('fingerprint')})"
        )
        kept = ("recovery_point", "recovery_data", "created_at")
    keep = f"CASE WHEN {t}.{qn('expires_at')} <= {now} THEN excluded.{{c}} ELSE {t}.{{c}} END"
    assignments = ", ".join(
        f"{qn(c)} = " + (keep.format(c=qn(c)) if c in kept else f"excluded.{qn(c)}")
        for c in columns[2:]
    )
    return f"ON CONFLICT ({qn('scope')}, {qn('key')}) DO UPDATE SET {assignments} WHERE {condition}"


def _returning(connection: BaseDatabaseWrapper, now: str) -> str:
    """The recovery point and data, and whether the claim took the key over: a takeover
    keeps the previous owner's ``created_at``, a new record has "now" (compared in the
    statement, so no datetime is loaded in Python)."""
    qn = connection.ops.quote_name
    return f"RETURNING {qn('recovery_point')}, {qn('recovery_data')}, {qn('created_at')} <> {now}"


def fresh(connection: BaseDatabaseWrapper, insert: str) -> str:
    """``insert``, doing nothing when the key is taken. PostgreSQL parses and analyses a
    statement's text on every run (Django sends values in the text): the upsert's ``DO
    UPDATE`` of fourteen columns costs the server more than the insert itself, and when it
    meets a record that stays it locks that row (a transaction id, so an autocommitted
    claim ends with a durable commit). This one meets a record without locking it; the
    caller reads or replaces it."""
    qn = connection.ops.quote_name
    return f"{insert} ON CONFLICT ({qn('scope')}, {qn('key')}) DO NOTHING RETURNING 1"


def upsert(
    connection: BaseDatabaseWrapper,
    table: str,
    insert: str,
    *,
    columns: Sequence[str],
    now: str,
    claim: bool,
) -> str:
    """``insert`` (of ``columns``), replacing an expired record or, for a claim, taking an
    abandoned lease over; ``now`` is the clock's SQL (the server's here, SQLite's
    parameter there)."""
    return (
        f"{insert} {_conflict(connection, table, columns, now, claim=claim)} "
        f"{_returning(connection, now)}"
    )


def count_quota(connection: BaseDatabaseWrapper, table: str) -> str:
    """One more on the record quota's (scope, window) row of ``table``, made at 1 where
    there is none: ``INSERT … ON CONFLICT DO UPDATE … RETURNING`` (atomic, the row locked
    for that statement only in autocommit). Parameters: scope, window, expiry."""
    qn = connection.ops.quote_name
    t = qn(table)
    scope, window, count, expires_at = (qn(c) for c in ("scope", "window", "count", "expires_at"))
    return (
        f"INSERT INTO {t} ({scope}, {window}, {count}, {expires_at}) "
        f"VALUES (%s, %s, 1, %s) ON CONFLICT ({scope}, {window}) "
        f"DO UPDATE SET {count} = {t}.{count} + 1 RETURNING {count}"
    )
