"""The SQL of :class:`~idempotency.stores.database.DatabaseStore`, built once per database: the
record's columns, the clock, and each vendor's statements.

Every statement takes *named* parameters: each value is given once, however often the
text uses it, so no caller counts placeholders. Where "now" comes from is the
:class:`Clock`'s business: on PostgreSQL the text reads the server's clock
(``statement_timestamp()``) and "now plus N seconds" takes the seconds as a parameter;
on MySQL and MariaDB the server's UTC clock (``UTC_TIMESTAMP(6)``) and microseconds;
on SQLite, which runs in the application's process, "now" and each deadline are
parameters computed by the application.

PostgreSQL and SQLite (3.35 and later) claim with ``INSERT … ON CONFLICT … RETURNING``:
first ``DO NOTHING`` (:func:`_fresh`), then the upsert that replaces an expired record
or takes an abandoned lease over (:func:`_upsert`). MySQL and MariaDB get statements of
their own (:func:`_mysql_upsert`): no ``ON CONFLICT``, and no ``RETURNING`` on MySQL 8. A
claim there is one ``INSERT … ON DUPLICATE KEY UPDATE`` whose update is conditional on
the record it meets, followed by :attr:`Statements.owner`, a read of the row (under the
lock the upsert took) that says whether the claim's fence is now in it. The reasons are
in docs/howto/mysql.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.dateparse import parse_datetime

#: Where the server's clock decides leases and expiry (elsewhere the application's).
SERVER_CLOCK_VENDORS = frozenset({"postgresql", "mysql"})

#: PostgreSQL's clock: every application server judges leases and expiry by it.
POSTGRESQL_NOW = "statement_timestamp()"
#: MySQL's and MariaDB's clock in UTC, the time zone Django stores datetimes in there
#: (``NOW(6)`` is in the session's time zone, which Django leaves at the server's).
MYSQL_NOW = "UTC_TIMESTAMP(6)"
#: SQLite's "now": a parameter, the application's clock.
SQLITE_NOW = "%(now)s"

#: PostgreSQL: swap the transaction's ``lock_timeout`` for ``%s``, answering the previous one.
SWAP_LOCK_TIMEOUT = "SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)"
#: PostgreSQL: set the transaction's ``lock_timeout`` to ``%s``.
SET_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %s, true)"
#: MySQL: keep the session's ``innodb_lock_wait_timeout`` and set it to ``%s`` whole seconds.
SET_LOCK_WAIT = (
    "SET @idempotency_lock_wait = @@SESSION.innodb_lock_wait_timeout,"
    " SESSION innodb_lock_wait_timeout = %s"
)
#: MySQL: put back what :data:`SET_LOCK_WAIT` kept (a session setting would outlive the
#: transaction on this connection).
RESTORE_LOCK_WAIT = "SET SESSION innodb_lock_wait_timeout = @idempotency_lock_wait"

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
        claim = _mysql_upsert(connection, claim, values=_insert_map(connection, claim=True),
                              claim=True)  # fmt: skip
        insert = _mysql_upsert(connection, insert, values=_insert_map(connection, claim=False),
                               claim=False)  # fmt: skip
        owner = _mysql_owner(connection, table, lookup_columns(connection))
        return Statements(lookup, complete, claim, claim, insert, insert, owner)
    now = now_sql(connection)
    return Statements(
        lookup=lookup,
        complete=complete,
        fresh_claim=_fresh(connection, claim),
        claim=_upsert(connection, table, claim, now=now, claim=True),
        fresh_insert=_fresh(connection, insert),
        insert=_upsert(connection, table, insert, now=now, claim=False),
    )


# -- the clock -------------------------------------------------------------------------------


def now_sql(connection: BaseDatabaseWrapper) -> str:
    """SQL of "now": the server's clock on PostgreSQL, MySQL and MariaDB, else a parameter."""
    if connection.vendor == "postgresql":
        return POSTGRESQL_NOW
    return MYSQL_NOW if connection.vendor == "mysql" else SQLITE_NOW


def later_sql(connection: BaseDatabaseWrapper, name: str) -> str:
    """SQL of "now plus parameter ``name``'s seconds": whole microseconds on MySQL
    (``INTERVAL … MICROSECOND``, exact on both MySQL and MariaDB, where a fractional
    ``SECOND`` is not); on SQLite the parameter itself, a deadline the application
    computed."""
    if connection.vendor == "postgresql":
        return f"({POSTGRESQL_NOW} + %({name})s * interval '1 second')"
    if connection.vendor == "mysql":
        return f"({MYSQL_NOW} + INTERVAL %({name})s MICROSECOND)"
    return f"%({name})s"


def epoch_sql(connection: BaseDatabaseWrapper, column: str) -> str:
    """SQL of a datetime as seconds since the epoch, on a server clock's database. On
    PostgreSQL a float loaded in C (a ``timestamptz`` goes through Django's loader in
    Python); on MySQL a difference from 1970 rather than ``UNIX_TIMESTAMP()``, which reads
    a ``DATETIME`` in the session's time zone and gives NULL past 2038 on MariaDB before
    11.5 (a long TTL would read as expired)."""
    if connection.vendor == "postgresql":
        return f"date_part('epoch', {column})"
    return f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01', {column}) * 1e-6"


class UTCNow(Now):
    """MySQL's clock in UTC for an ORM update (Django's ``Now()`` is
    ``CURRENT_TIMESTAMP(6)``, in the session's time zone)."""

    def as_mysql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return self.as_sql(compiler, connection, template=MYSQL_NOW, **extra_context)


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


# -- PostgreSQL (and SQLite) ------------------------------------------------------------------


def _conflict(connection: BaseDatabaseWrapper, table: str, now: str, *, claim: bool) -> str:
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
        for c in COLUMNS[2:]
    )
    return f"ON CONFLICT ({qn('scope')}, {qn('key')}) DO UPDATE SET {assignments} WHERE {condition}"


def _returning(connection: BaseDatabaseWrapper, now: str) -> str:
    """The recovery point and data, and whether the claim took the key over: a takeover
    keeps the previous owner's ``created_at``, a new record has "now" (compared in the
    statement, so no datetime is loaded in Python)."""
    qn = connection.ops.quote_name
    return f"RETURNING {qn('recovery_point')}, {qn('recovery_data')}, {qn('created_at')} <> {now}"


def _fresh(connection: BaseDatabaseWrapper, insert: str) -> str:
    """``insert``, doing nothing when the key is taken. PostgreSQL parses and analyses a
    statement's text on every run (Django sends values in the text): the upsert's ``DO
    UPDATE`` of fourteen columns costs the server more than the insert itself, and when it
    meets a record that stays it locks that row (a transaction id, so an autocommitted
    claim ends with a durable commit). This one meets a record without locking it; the
    caller reads or replaces it."""
    qn = connection.ops.quote_name
    return f"{insert} ON CONFLICT ({qn('scope')}, {qn('key')}) DO NOTHING RETURNING 1"


def _upsert(
    connection: BaseDatabaseWrapper, table: str, insert: str, *, now: str, claim: bool
) -> str:
    """``insert``, replacing an expired record or, for a claim, taking an
    abandoned lease over; ``now`` is the clock's SQL (the server's here, SQLite's
    parameter there)."""
    return (
        f"{insert} {_conflict(connection, table, now, claim=claim)} {_returning(connection, now)}"
    )


def count_quota(connection: BaseDatabaseWrapper, table: str) -> str:
    """PostgreSQL and SQLite: one more on the record quota's (scope, window) row of
    ``table``, made at 1 where there is none: ``INSERT … ON CONFLICT DO UPDATE …
    RETURNING`` (atomic, the row locked for that statement only in autocommit).
    Parameters: scope, window, expiry."""
    qn = connection.ops.quote_name
    t = qn(table)
    scope, window, count, expires_at = (qn(c) for c in ("scope", "window", "count", "expires_at"))
    return (
        f"INSERT INTO {t} ({scope}, {window}, {count}, {expires_at}) "
        f"VALUES (%s, %s, 1, %s) ON CONFLICT ({scope}, {window}) "
        f"DO UPDATE SET {count} = {t}.{count} + 1 RETURNING {count}"
    )


# -- MySQL and MariaDB -------------------------------------------------------------------------


def _mysql_upsert(
    connection: BaseDatabaseWrapper, insert: str, *, values: Mapping[str, str], claim: bool
) -> str:
    """MySQL and MariaDB: the claim (or atomic mode's optimistic insert): ``insert``
    (whose SQL ``values`` are) ``ON DUPLICATE KEY UPDATE``, which inserts a free key, replaces
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

    Whether it won is read by :func:`_mysql_owner` (the affected-rows count cannot say: Django
    connects with ``CLIENT_FOUND_ROWS``, so an insert and a record left unchanged both
    count 1).
    """
    qn = connection.ops.quote_name
    replace = f"{qn('expires_at')} <= {MYSQL_NOW}"
    if claim:
        replace += (
            f" OR ({qn('state')} = 'in_progress' AND {qn('lease_expires_at')} <= {MYSQL_NOW}"
            f" AND {qn('fingerprint')} = %(fingerprint)s)"
        )
    won = f"{qn('fence')} = %(fence)s"
    assignments = [f"{qn('fence')} = IF({replace}, %(fence)s, {qn('fence')})"]
    kept = ("recovery_point", "recovery_data", "created_at") if claim else ()
    for column in kept:  # only a replaced expired record takes new ones; a takeover keeps them
        assignments.append(
            f"{qn(column)} = IF({won} AND {qn('expires_at')} <= {MYSQL_NOW}, {values[column]}, "
            f"{qn(column)})"
        )
    for column in COLUMNS[2:]:
        if column != "fence" and column not in kept:
            assignments.append(f"{qn(column)} = IF({won}, {values[column]}, {qn(column)})")
    return f"{insert} ON DUPLICATE KEY UPDATE " + ", ".join(assignments)


def _mysql_owner(connection: BaseDatabaseWrapper, table: str, lookup: Sequence[str]) -> str:
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
