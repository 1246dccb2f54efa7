"""The SQL of :class:`~idempotency.stores.DatabaseStore`, built once per database: the
record's columns, the clock, and each vendor's statements (:mod:`.postgresql`,
:mod:`.mysql`, :mod:`.sqlite`).

Every statement takes *named* parameters: each value is given once, however often the
text uses it, so no caller counts placeholders. Where "now" comes from is the
:class:`Clock`'s business: on PostgreSQL the text reads the server's clock
(``statement_timestamp()``) and "now plus N seconds" takes the seconds as a parameter;
on MySQL and MariaDB the server's UTC clock (``UTC_TIMESTAMP(6)``) and microseconds;
on SQLite, which runs in the application's process, "now" and each deadline are
parameters computed by the application.

MySQL and MariaDB get statements of their own (:func:`.mysql.upsert`): no ``ON
CONFLICT``, and no ``RETURNING`` on MySQL 8. A claim there is one ``INSERT … ON
DUPLICATE KEY UPDATE`` whose update is conditional on the record it meets, followed by
:attr:`Statements.owner`, a read of the row (under the lock the upsert took) that says
whether the claim's fence is now in it. The reasons are in docs/howto/mysql.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from idempotency.stores.sql import mysql, postgresql, sqlite

#: Where the server's clock decides leases and expiry (elsewhere the application's).
SERVER_CLOCK_VENDORS = frozenset({"postgresql", "mysql"})

#: The record's columns, in the order an insert writes them.
COLUMNS = (
    "scope",
    "key",
    "fingerprint",
    "state",
    "fence",
    "lease_expires_at",
    "method",
    "route",
    "status_code",
    "response_headers",
    "response_body",
    "mac",
    "recovery_point",
    "recovery_data",
    "created_at",
    "completed_at",
    "expires_at",
)
#: What a lookup reads, in this order; on PostgreSQL the server's "now" follows, and
#: the datetimes are seconds since the epoch (:data:`EPOCH_FIELDS`).
LOOKUP_FIELDS = (
    "fingerprint",
    "state",
    "lease_expires_at",
    "status_code",
    "response_headers",
    "response_body",
    "recovery_point",
    "recovery_data",
    "fence",
    "mac",
    "expires_at",
)
#: The lookup's datetimes, read as seconds since the epoch on PostgreSQL.
EPOCH_FIELDS = frozenset({"lease_expires_at", "expires_at"})


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
    """The statements on ``connection`` for the records' ``table``."""
    lookup, complete = _lookup(connection, table), _complete(connection, table)
    claim, insert = _insert(connection, table, claim=True), _insert(connection, table, claim=False)
    if connection.vendor == "mysql":
        claim = mysql.upsert(
            connection, claim, values=_insert_map(connection, claim=True), columns=COLUMNS,
            claim=True,
        )  # fmt: skip
        insert = mysql.upsert(
            connection, insert, values=_insert_map(connection, claim=False), columns=COLUMNS,
            claim=False,
        )  # fmt: skip
        owner = mysql.owner(connection, table, lookup_columns(connection))
        return Statements(lookup, complete, claim, claim, insert, insert, owner)
    now = now_sql(connection)
    return Statements(
        lookup=lookup,
        complete=complete,
        fresh_claim=postgresql.fresh(connection, claim),
        claim=postgresql.upsert(connection, table, claim, columns=COLUMNS, now=now, claim=True),
        fresh_insert=postgresql.fresh(connection, insert),
        insert=postgresql.upsert(connection, table, insert, columns=COLUMNS, now=now, claim=False),
    )


# -- the clock -------------------------------------------------------------------------------


def now_sql(connection: BaseDatabaseWrapper) -> str:
    """SQL of "now": the server's clock on PostgreSQL, MySQL and MariaDB, else a parameter."""
    if connection.vendor == "postgresql":
        return postgresql.NOW
    return mysql.NOW if connection.vendor == "mysql" else sqlite.NOW


def later_sql(connection: BaseDatabaseWrapper, name: str) -> str:
    """SQL of "now plus parameter ``name``'s seconds" (microseconds on MySQL)."""
    if connection.vendor == "postgresql":
        return postgresql.later(name)
    return mysql.later(name) if connection.vendor == "mysql" else sqlite.later(name)


def epoch_sql(connection: BaseDatabaseWrapper, column: str) -> str:
    """SQL of a datetime as seconds since the epoch, on a server clock's database."""
    if connection.vendor == "postgresql":
        return postgresql.epoch(column)
    return mysql.epoch(column)


class Clock:
    """The time parameters of one statement: ``now`` and named deadlines (``lease``,
    ``ttl``: that many seconds from now). On PostgreSQL the server's clock decides, so
    every application server judges leases and expiry by one clock, and one whose clock
    runs ahead can never take over a live lease."""

    __slots__ = ("_adapt", "_now", "server", "vendor")

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.vendor = connection.vendor
        self.server = self.vendor in SERVER_CLOCK_VENDORS
        if not self.server:
            self._adapt = connection.ops.adapt_datetimefield_value
            self._now = timezone.now()

    def params(self, **seconds: float) -> dict[str, Any]:
        """``now`` (SQLite only) and each named deadline, as the statements expect them:
        seconds on PostgreSQL, whole microseconds on MySQL (``INTERVAL … MICROSECOND``,
        exact on both MySQL and MariaDB, where a fractional ``SECOND`` is not)."""
        if self.vendor == "mysql":
            return {name: round(value * 1_000_000) for name, value in seconds.items()}
        if self.server:
            return {name: float(value) for name, value in seconds.items()}
        params = {
            name: self._adapt(self._now + timedelta(seconds=s)) for name, s in seconds.items()
        }
        params["now"] = self._adapt(self._now)
        return params


def as_datetime(connection: BaseDatabaseWrapper, value: Any) -> datetime | None:
    """A datetime column as the ORM would return it (aware; SQLite hands back naive or text)."""
    if value is None:
        return None
    convert = getattr(connection.ops, "convert_datetimefield_value", None)
    if convert is not None:
        converted: datetime | None = convert(value, None, connection)
        return converted
    if not isinstance(value, datetime):  # pragma: no cover - no such backend in Django
        return parse_datetime(str(value))
    return value


def as_epoch(connection: BaseDatabaseWrapper, value: Any) -> float | None:
    """A datetime column as seconds since the epoch: what the lookup reads on
    PostgreSQL (``date_part``, a float loaded in C: a ``timestamptz`` goes through
    Django's loader in Python), computed here elsewhere."""
    if value is None or isinstance(value, float):
        return value
    moment = as_datetime(connection, value)
    return moment.timestamp() if moment is not None else None


def as_json(value: Any) -> Any:
    """A JSON column as the ORM would return it (Django loads jsonb as text)."""
    return json.loads(value) if isinstance(value, str) else value


# -- the statements every vendor shares -------------------------------------------------------


def lookup_columns(connection: BaseDatabaseWrapper) -> list[str]:
    """What a lookup selects: :data:`LOOKUP_FIELDS`, and on a server clock's database the
    datetimes as seconds since the epoch and the server's "now" last."""
    qn = connection.ops.quote_name
    if connection.vendor not in SERVER_CLOCK_VENDORS:
        return [qn(c) for c in LOOKUP_FIELDS]
    columns = [epoch_sql(connection, qn(c)) if c in EPOCH_FIELDS else qn(c) for c in LOOKUP_FIELDS]
    columns.append(epoch_sql(connection, now_sql(connection)))
    return columns


def _insert_map(connection: BaseDatabaseWrapper, *, claim: bool) -> dict[str, str]:
    """The VALUES of an upsert, column by column: a claim (in progress, with a lease)
    or a completed record (atomic mode's optimistic insert)."""
    now = now_sql(connection)
    fixed = {
        "lease_expires_at": later_sql(connection, "lease") if claim else "NULL",
        "created_at": now,
        "completed_at": "NULL" if claim else now,
        "expires_at": later_sql(connection, "ttl"),
        "recovery_point": "''",
        "recovery_data": "NULL",
    }
    if claim:  # a claim's response columns are constants: fewer parameters to send
        fixed.update(
            state="'in_progress'", status_code="NULL", response_headers="'[]'",
            response_body="NULL", mac="''",
        )  # fmt: skip
    return {column: fixed.get(column, f"%({column})s") for column in COLUMNS}


def _insert(connection: BaseDatabaseWrapper, table: str, *, claim: bool) -> str:
    qn = connection.ops.quote_name
    columns = ", ".join(qn(c) for c in COLUMNS)
    values = ", ".join(_insert_map(connection, claim=claim).values())
    return f"INSERT INTO {qn(table)} ({columns}) VALUES ({values})"


def _lookup(connection: BaseDatabaseWrapper, table: str) -> str:
    # Equality on the unique (scope, key) index only; expiry is checked in Python. A
    # range condition on expires_at would make PostgreSQL's planner probe the end of
    # the expires_at index for its estimate, and right after a purge that end is a
    # long run of dead entries: planning alone would take many times the query.
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
