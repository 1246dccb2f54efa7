"""MySQL's and MariaDB's SQL in :class:`~idempotency.stores.database.DatabaseStore`: the server's
UTC clock, the claim and the optimistic insert without ``ON CONFLICT`` (and without
``RETURNING`` on MySQL 8), and ``innodb_lock_wait_timeout``.

One ``INSERT … ON DUPLICATE KEY UPDATE`` whose update is conditional on the record it
meets (:func:`upsert`), then a read of the row it left (:func:`owner`). The reasons are
in docs/howto/mysql.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.functions import Now

#: The server's clock in UTC, the time zone Django stores datetimes in there (``NOW(6)``
#: is in the session's time zone, which Django leaves at the server's).
NOW = "UTC_TIMESTAMP(6)"
#: Keep the session's ``innodb_lock_wait_timeout`` and set it to ``%s`` whole seconds.
SET_LOCK_WAIT = (
    "SET @idempotency_lock_wait = @@SESSION.innodb_lock_wait_timeout,"
    " SESSION innodb_lock_wait_timeout = %s"
)
#: Put back what :data:`SET_LOCK_WAIT` kept (a session setting would outlive the
#: transaction on this connection).
RESTORE_LOCK_WAIT = "SET SESSION innodb_lock_wait_timeout = @idempotency_lock_wait"


def later(name: str) -> str:
    """SQL of "now plus parameter ``name``'s whole microseconds" (``INTERVAL … MICROSECOND``,
    exact on both MySQL and MariaDB, where a fractional ``SECOND`` is not)."""
    return f"({NOW} + INTERVAL %({name})s MICROSECOND)"


def epoch(column: str) -> str:
    """SQL of a datetime as seconds since the epoch: a difference from 1970 rather than
    ``UNIX_TIMESTAMP()``, which reads a ``DATETIME`` in the session's time zone and gives
    NULL past 2038 on MariaDB before 11.5 (a long TTL would read as expired)."""
    return f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01', {column}) * 1e-6"


class UTCNow(Now):
    """The server's clock in UTC for an ORM update (Django's ``Now()`` is
    ``CURRENT_TIMESTAMP(6)``, in the session's time zone)."""

    def as_mysql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return self.as_sql(compiler, connection, template=NOW, **extra_context)


def upsert(
    connection: BaseDatabaseWrapper,
    insert: str,
    *,
    values: Mapping[str, str],
    columns: Sequence[str],
    claim: bool,
) -> str:
    """The claim (or atomic mode's optimistic insert): ``insert`` (of ``columns``, whose
    SQL ``values`` are) ``ON DUPLICATE KEY UPDATE``, which inserts a free key, replaces
    an expired record (or, for a claim, takes an abandoned lease of the same request
    over) and leaves any other record as it is.

    The fence decides: it is assigned first, to this claim's new fence only when the
    record met may be replaced, and every later assignment copies the new value only
    where the fence is now this claim's (MySQL evaluates an update's assignments left to
    right, each seeing the ones before; the conditions on the record's own columns are
    therefore all read before any of them changes). A takeover keeps the previous
    owner's recovery point and ``created_at``, as on PostgreSQL. The row's own columns
    are named bare (the record met), the new values are the statement's parameters
    again: no ``VALUES()``, which MySQL 8.0.20 deprecated, nor the row alias that
    replaced it, which MariaDB lacks.

    Whether it won is read by :func:`owner` (the affected-rows count cannot say: Django
    connects with ``CLIENT_FOUND_ROWS``, so an insert and a record left unchanged both
    count 1).
    """
    qn = connection.ops.quote_name
    replace = f"{qn('expires_at')} <= {NOW}"
    if claim:
        replace += (
            f" OR ({qn('state')} = 'in_progress' AND {qn('lease_expires_at')} <= {NOW}"
            f" AND {qn('fingerprint')} = %(fingerprint)s)"
        )
    won = f"{qn('fence')} = %(fence)s"
    assignments = [f"{qn('fence')} = IF({replace}, %(fence)s, {qn('fence')})"]
    kept = ("recovery_point", "recovery_data", "created_at") if claim else ()
    for column in kept:  # only a replaced expired record takes new ones; a takeover keeps them
        assignments.append(
            f"{qn(column)} = IF({won} AND {qn('expires_at')} <= {NOW}, {values[column]}, "
            f"{qn(column)})"
        )
    for column in columns[2:]:
        if column != "fence" and column not in kept:
            assignments.append(f"{qn(column)} = IF({won}, {values[column]}, {qn(column)})")
    return f"{insert} ON DUPLICATE KEY UPDATE " + ", ".join(assignments)


def owner(connection: BaseDatabaseWrapper, table: str, lookup: Sequence[str]) -> str:
    """The row an upsert met or wrote: its fence, the ``lookup`` columns, and whether a
    claim took it over (a takeover kept the previous ``created_at``; a new record's is the
    upsert's "now", exactly its lease's start). ``FOR UPDATE``: the upsert already locked
    the row (an insert's record lock, a duplicate's next-key lock), so this reads the
    latest committed version whatever the isolation level and snapshot, and waits for
    nothing the upsert did not."""
    qn = connection.ops.quote_name
    columns = [qn("fence"), *lookup]
    columns.append(
        f"{qn('created_at')} < {qn('lease_expires_at')} - INTERVAL %(lease)s MICROSECOND"
    )
    return (
        f"SELECT {', '.join(columns)} FROM {qn(table)} "
        f"WHERE {qn('scope')} = %(scope)s AND {qn('key')} = %(key)s FOR UPDATE"
    )
