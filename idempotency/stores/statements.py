"""The SQL of :class:`~idempotency.stores.database.DatabaseStore`, built once per database.

Every statement takes *named* parameters: each value is given once, however often the
text uses it, so no caller counts placeholders. Where "now" comes from is the
:class:`Clock`'s business: on PostgreSQL the text reads the server's clock
(``statement_timestamp()``) and "now plus N seconds" takes the seconds as a parameter;
on MySQL and MariaDB the server's UTC clock (``UTC_TIMESTAMP(6)``) and microseconds;
on SQLite, which runs in the application's process, "now" and each deadline are
parameters computed by the application (:mod:`~idempotency.stores.sql_clock`).

MySQL and MariaDB get statements of their own
(:func:`~idempotency.stores.statements_mysql.upsert`): no
``ON CONFLICT``, and no ``RETURNING`` on MySQL 8. A claim there is one ``INSERT … ON
DUPLICATE KEY UPDATE`` whose update is conditional on the record it meets, followed by
:attr:`Statements.owner`, a read of the row (under the lock the upsert took) that says
whether the claim's fence is now in it. The reasons are in docs/howto/mysql.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.backends.base.base import BaseDatabaseWrapper

from idempotency.stores import statements_mysql as mysql
from idempotency.stores import statements_postgresql as postgresql
from idempotency.stores.sql_clock import (
    MYSQL_NOW,
    SERVER_CLOCK_VENDORS,
    SERVER_NOW,
    Clock,
    as_datetime,
    as_epoch,
    as_json,
    epoch_sql,
    later_sql,
    now_sql,
)
from idempotency.stores.sql_columns import COLUMNS, EPOCH_FIELDS, LOOKUP_FIELDS, lookup_columns

__all__ = [
    "COLUMNS",
    "EPOCH_FIELDS",
    "LOOKUP_FIELDS",
    "MYSQL_NOW",
    "SERVER_CLOCK_VENDORS",
    "SERVER_NOW",
    "Clock",
    "Statements",
    "as_datetime",
    "as_epoch",
    "as_json",
    "build",
    "epoch_sql",
    "later_sql",
    "now_sql",
]


@dataclass(frozen=True)
class Statements:
    """The text of every statement on one database connection (alias and vendor)."""

    lookup: str
    complete: str
    #: a claim of a free key: ``ON CONFLICT DO NOTHING``, a short text that takes no lock
    #: on a record already there
    fresh_claim: str
    #: a claim that also replaces an expired record or takes an abandoned lease over
    claim: str
    #: atomic mode's optimistic insert of a completed record: of a free key, and the
    #: upsert that also replaces an expired record
    fresh_insert: str
    insert: str
    #: MySQL and MariaDB: after an upsert, the row it met or wrote, read under the upsert's
    #: lock: its fence (the claim's own when it won), the lookup's fields and whether it
    #: was taken over. None elsewhere (``RETURNING`` says it in the upsert itself).
    owner: str | None = None


def build(connection: BaseDatabaseWrapper, table: str) -> Statements:
    if connection.vendor == "mysql":
        claim, insert = (
            mysql.upsert(connection, table, claim=True),
            mysql.upsert(connection, table, claim=False),
        )
        return Statements(
            lookup=_lookup(connection, table),
            complete=_complete(connection, table),
            fresh_claim=claim,
            claim=claim,
            fresh_insert=insert,
            insert=insert,
            owner=mysql.owner(connection, table),
        )
    return Statements(
        lookup=_lookup(connection, table),
        complete=_complete(connection, table),
        fresh_claim=postgresql.fresh(connection, table, claim=True),
        claim=postgresql.upsert(connection, table, claim=True),
        fresh_insert=postgresql.fresh(connection, table, claim=False),
        insert=postgresql.upsert(connection, table, claim=False),
    )


def _lookup(connection: BaseDatabaseWrapper, table: str) -> str:
    # Equality on the unique (scope, key) index only; expiry is checked in Python. A
    # range condition on expires_at would make PostgreSQL's planner probe the end of
    # the expires_at index for its estimate, and right after a purge that end is a
    # long run of dead entries: planning alone took many times the query.
    # On PostgreSQL the server's clock comes back with the row, to judge it by, and the
    # datetimes come back as seconds since the epoch (see as_epoch).
    qn = connection.ops.quote_name
    columns = lookup_columns(connection)
    return (
        f"SELECT {', '.join(columns)} FROM {qn(table)} "
        f"WHERE {qn('scope')} = %(scope)s AND {qn('key')} = %(key)s"
    )


def _complete(connection: BaseDatabaseWrapper, table: str) -> str:
    qn = connection.ops.quote_name
    return (
        f"UPDATE {qn(table)} SET {qn('state')} = 'completed', "
        f"{qn('status_code')} = %(status_code)s, {qn('response_headers')} = "
        f"%(response_headers)s, {qn('response_body')} = %(response_body)s, {qn('mac')} = %(mac)s, "
        f"{qn('completed_at')} = {now_sql(connection)}, {qn('lease_expires_at')} = NULL, "
        f"{qn('expires_at')} = {later_sql(connection, 'ttl')} "
        f"WHERE {qn('scope')} = %(scope)s AND {qn('key')} = %(key)s "
        f"AND {qn('fence')} = %(fence)s AND {qn('state')} = 'in_progress'"
    )
