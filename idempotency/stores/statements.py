"""The SQL of :class:`~idempotency.stores.database.DatabaseStore`, built once per database.

Every statement takes *named* parameters: each value is given once, however often the
text uses it, so no caller counts placeholders. Where "now" comes from is the
:class:`Clock`'s business: on PostgreSQL the text reads the server's clock
(``statement_timestamp()``) and "now plus N seconds" takes the seconds as a parameter;
on SQLite, which runs in the application's process, "now" and each deadline are
parameters computed by the application.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone
from django.utils.dateparse import parse_datetime

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
    "expires_at",
)
#: The lookup's datetimes, read as seconds since the epoch on PostgreSQL.
EPOCH_FIELDS = frozenset({"lease_expires_at", "expires_at"})
SERVER_NOW = "statement_timestamp()"


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
    """A datetime column as seconds since the epoch: what :func:`_lookup` reads on
    PostgreSQL (``date_part``, a float loaded in C: a ``timestamptz`` goes through
    Django's loader in Python, about 3 µs each), computed here elsewhere."""
    if value is None or isinstance(value, float):
        return value
    moment = as_datetime(connection, value)
    return moment.timestamp() if moment is not None else None


def as_json(value: Any) -> Any:
    """A JSON column as the ORM would return it (Django loads jsonb as text)."""
    return json.loads(value) if isinstance(value, str) else value


class Clock:
    """The time parameters of one statement: ``now`` and named deadlines (``lease``,
    ``ttl``: that many seconds from now). On PostgreSQL the server's clock decides, so
    every application server judges leases and expiry by one clock, and one whose clock
    runs ahead can never take over a live lease."""

    __slots__ = ("_adapt", "_now", "server")

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.server = connection.vendor == "postgresql"
        if not self.server:
            self._adapt = connection.ops.adapt_datetimefield_value
            self._now = timezone.now()

    def params(self, **seconds: float) -> dict[str, Any]:
        """``now`` (SQLite only) and each named deadline, as the statements expect them."""
        if self.server:
            return {name: float(value) for name, value in seconds.items()}
        params = {
            name: self._adapt(self._now + timedelta(seconds=s)) for name, s in seconds.items()
        }
        params["now"] = self._adapt(self._now)
        return params


def now_sql(connection: BaseDatabaseWrapper) -> str:
    return SERVER_NOW if connection.vendor == "postgresql" else "%(now)s"


def later_sql(connection: BaseDatabaseWrapper, name: str) -> str:
    """SQL of "now plus parameter ``name``'s seconds"."""
    if connection.vendor == "postgresql":
        return f"({SERVER_NOW} + %({name})s * interval '1 second')"
    return f"%({name})s"


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


def build(connection: BaseDatabaseWrapper, table: str) -> Statements:
    return Statements(
        lookup=_lookup(connection, table),
        complete=_complete(connection, table),
        fresh_claim=_fresh(connection, table, claim=True),
        claim=_upsert(connection, table, claim=True),
        fresh_insert=_fresh(connection, table, claim=False),
        insert=_upsert(connection, table, claim=False),
    )


def _lookup(connection: BaseDatabaseWrapper, table: str) -> str:
    # Equality on the unique (scope, key) index only; expiry is checked in Python. A
    # range condition on expires_at would make PostgreSQL's planner probe the end of
    # the expires_at index for its estimate, and right after a purge that end is a
    # long run of dead entries: planning alone took 20 times the query (0.5 ms).
    # On PostgreSQL the server's clock comes back with the row, to judge it by, and the
    # datetimes come back as seconds since the epoch (see as_epoch).
    qn = connection.ops.quote_name
    columns = [qn(c) for c in LOOKUP_FIELDS]
    if connection.vendor == "postgresql":
        columns = [
            f"date_part('epoch', {qn(c)})" if c in EPOCH_FIELDS else qn(c) for c in LOOKUP_FIELDS
        ]
        columns.append(f"date_part('epoch', {SERVER_NOW})")
    return (
        f"SELECT {', '.join(columns)} FROM {qn(table)} "
        f"WHERE {qn('scope')} = %(scope)s AND {qn('key')} = %(key)s"
    )


def _complete(connection: BaseDatabaseWrapper, table: str) -> str:
    qn = connection.ops.quote_name
    return (
        f"UPDATE {qn(table)} SET {qn('state')} = 'completed', "
        f"{qn('status_code')} = %(status_code)s, {qn('response_headers')} = "
        f"%(response_headers)s, {qn('response_body')} = %(response_body)s, "
        f"{qn('completed_at')} = {now_sql(connection)}, {qn('lease_expires_at')} = NULL, "
        f"{qn('expires_at')} = {later_sql(connection, 'ttl')} "
        f"WHERE {qn('scope')} = %(scope)s AND {qn('key')} = %(key)s "
        f"AND {qn('fence')} = %(fence)s AND {qn('state')} = 'in_progress'"
    )


def _values(connection: BaseDatabaseWrapper, *, claim: bool) -> list[str]:
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
            response_body="NULL",
        )  # fmt: skip
    return [fixed.get(column, f"%({column})s") for column in COLUMNS]


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


def _insert(connection: BaseDatabaseWrapper, table: str, *, claim: bool) -> str:
    qn = connection.ops.quote_name
    columns = ", ".join(qn(c) for c in COLUMNS)
    values = ", ".join(_values(connection, claim=claim))
    return f"INSERT INTO {qn(table)} ({columns}) VALUES ({values})"


def _fresh(connection: BaseDatabaseWrapper, table: str, *, claim: bool) -> str:
    """An insert that does nothing when the key is taken. PostgreSQL parses and analyses
    a statement's text on every run (Django sends values in the text): the upsert's
    ``DO UPDATE`` of fourteen columns costs the server more than the insert itself, and
    when it meets a record that stays it locks that row (a transaction id, so an
    autocommitted claim ends with a durable commit). This one meets a record without
    locking it; the caller reads or replaces it."""
    qn = connection.ops.quote_name
    return (
        f"{_insert(connection, table, claim=claim)} "
        f"ON CONFLICT ({qn('scope')}, {qn('key')}) DO NOTHING RETURNING 1"
    )


def _upsert(connection: BaseDatabaseWrapper, table: str, *, claim: bool) -> str:
    return (
        f"{_insert(connection, table, claim=claim)} "
        f"{_conflict(connection, table, claim=claim)} {_returning(connection)}"
    )
