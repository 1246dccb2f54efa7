"""The claim and the optimistic insert on MySQL and MariaDB: no ``ON CONFLICT``, and no
``RETURNING`` on MySQL 8. One ``INSERT … ON DUPLICATE KEY UPDATE`` whose update is
conditional on the record it meets (:func:`upsert`), then a read of the row it left
(:func:`owner`). The reasons are in docs/howto/mysql.md.
"""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

from idempotency.stores.sql_clock import now_sql
from idempotency.stores.sql_columns import COLUMNS, insert, insert_values, lookup_columns


def upsert(connection: BaseDatabaseWrapper, table: str, *, claim: bool) -> str:
    """MySQL's and MariaDB's claim (or atomic mode's optimistic insert): one ``INSERT …
    ON DUPLICATE KEY UPDATE`` that inserts a free key, replaces an expired record (or,
    for a claim, takes an abandoned lease of the same request over) and leaves any other
    record as it is.

    The fence decides: it is assigned first, to this claim's new fence only when the
    record met may be replaced, and every later assignment copies the new value only
    where the fence is now this claim's (MySQL evaluates an update's assignments left to
    right, each seeing the ones before; the conditions on the record's own columns are
    therefore all read before any of them changes). A takeover keeps the previous
    owner's recovery point and ``created_at``, as on PostgreSQL. The row's own columns
    are named bare (the record met), the new values are the statement's parameters
    again: no ``VALUES()``, which MySQL 8.0.20 deprecated, nor the row alias that
    replaced it, which MariaDB lacks.

    Whether it won is read by :attr:`Statements.owner` (the affected-rows count cannot
    say: Django connects with ``CLIENT_FOUND_ROWS``, so an insert and a record left
    unchanged both count 1).
    """
    qn = connection.ops.quote_name
    now = now_sql(connection)
    values = dict(zip(COLUMNS, insert_values(connection, claim=claim), strict=True))
    replace = f"{qn('expires_at')} <= {now}"
    if claim:
        replace += (
            f" OR ({qn('state')} = 'in_progress' AND {qn('lease_expires_at')} <= {now}"
            f" AND {qn('fingerprint')} = %(fingerprint)s)"
        )
    won = f"{qn('fence')} = %(fence)s"
    assignments = [f"{qn('fence')} = IF({replace}, %(fence)s, {qn('fence')})"]
    kept = ("recovery_point", "recovery_data", "created_at") if claim else ()
    for column in kept:  # only a replaced expired record takes new ones; a takeover keeps them
        assignments.append(
            f"{qn(column)} = IF({won} AND {qn('expires_at')} <= {now}, {values[column]}, "
            f"{qn(column)})"
        )
    for column in COLUMNS[2:]:
        if column != "fence" and column not in kept:
            assignments.append(f"{qn(column)} = IF({won}, {values[column]}, {qn(column)})")
    return f"{insert(connection, table, claim=claim)} ON DUPLICATE KEY UPDATE " + ", ".join(
        assignments
    )


def owner(connection: BaseDatabaseWrapper, table: str) -> str:
    """The row an upsert met or wrote: its fence, the lookup's fields, and whether a claim
    took it over (a takeover kept the previous ``created_at``; a new record's is the
    upsert's "now", exactly its lease's start). ``FOR UPDATE``: the upsert already locked
    the row (an insert's record lock, a duplicate's next-key lock), so this reads the
    latest committed version whatever the isolation level and snapshot, and waits for
    nothing the upsert did not."""
    qn = connection.ops.quote_name
    columns = [qn("fence"), *lookup_columns(connection)]
    columns.append(
        f"{qn('created_at')} < {qn('lease_expires_at')} - INTERVAL %(lease)s MICROSECOND"
    )
    return (
        f"SELECT {', '.join(columns)} FROM {qn(table)} "
        f"WHERE {qn('scope')} = %(scope)s AND {qn('key')} = %(key)s FOR UPDATE"
    )
