"""The claim and the optimistic insert on PostgreSQL and SQLite: ``INSERT … ON CONFLICT``,
first ``DO NOTHING`` (:func:`fresh`), then the upsert that replaces an expired record or
takes an abandoned lease over (:func:`upsert`), each ``RETURNING`` what it did.
"""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

from idempotency.stores.sql_clock import now_sql
from idempotency.stores.sql_columns import COLUMNS, insert


def _conflict(connection: BaseDatabaseWrapper, table: str, *, claim: bool) -> str:
    """``ON CONFLICT``: replace only an expired record (or, for a claim, an in-progress one
    of the same request whose lease ran out: a takeover, which keeps the previous owner's
    recovery point and the record's created_at, so the new owner can tell)."""
    qn = connection.ops.quote_name
    now = now_sql(connection)
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
        for c in COLUMNS[2:]
    )
    return f"ON CONFLICT ({qn('scope')}, {qn('key')}) DO UPDATE SET {assignments} WHERE {condition}"


def _returning(connection: BaseDatabaseWrapper) -> str:
    """The recovery point and data, and whether the claim took the key over: a takeover
    keeps the previous owner's ``created_at``, a new record has "now" (compared in the
    statement, so no datetime is loaded in Python)."""
    qn = connection.ops.quote_name
    return (
        f"RETURNING {qn('recovery_point')}, {qn('recovery_data')}, "
        f"{qn('created_at')} <> {now_sql(connection)}"
    )


def fresh(connection: BaseDatabaseWrapper, table: str, *, claim: bool) -> str:
    """An insert that does nothing when the key is taken. PostgreSQL parses and analyses
    a statement's text on every run (Django sends values in the text): the upsert's
    ``DO UPDATE`` of fourteen columns costs the server more than the insert itself, and
    when it meets a record that stays it locks that row (a transaction id, so an
    autocommitted claim ends with a durable commit). This one meets a record without
    locking it; the caller reads or replaces it."""
    qn = connection.ops.quote_name
    return (
        f"{insert(connection, table, claim=claim)} "
        f"ON CONFLICT ({qn('scope')}, {qn('key')}) DO NOTHING RETURNING 1"
    )


def upsert(connection: BaseDatabaseWrapper, table: str, *, claim: bool) -> str:
    return (
        f"{insert(connection, table, claim=claim)} "
        f"{_conflict(connection, table, claim=claim)} {_returning(connection)}"
    )
