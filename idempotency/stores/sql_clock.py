"""Time in the SQL of :class:`~idempotency.stores.DatabaseStore`, by vendor: where "now"
comes from (the server's clock on PostgreSQL, MySQL and MariaDB; the application's on
SQLite, as parameters), and the datetimes and JSON read back as the ORM would return them.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone
from django.utils.dateparse import parse_datetime

SERVER_NOW = "statement_timestamp()"
#: MySQL's and MariaDB's clock in UTC, the time zone Django stores datetimes in there
#: (``NOW(6)`` is in the session's time zone, which Django leaves at the server's).
MYSQL_NOW = "UTC_TIMESTAMP(6)"
#: Where the server's clock decides leases and expiry (elsewhere the application's).
SERVER_CLOCK_VENDORS = frozenset({"postgresql", "mysql"})


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


def now_sql(connection: BaseDatabaseWrapper) -> str:
    if connection.vendor == "postgresql":
        return SERVER_NOW
    return MYSQL_NOW if connection.vendor == "mysql" else "%(now)s"


def later_sql(connection: BaseDatabaseWrapper, name: str) -> str:
    """SQL of "now plus parameter ``name``'s seconds" (microseconds on MySQL)."""
    if connection.vendor == "postgresql":
        return f"({SERVER_NOW} + %({name})s * interval '1 second')"
    if connection.vendor == "mysql":
        return f"({MYSQL_NOW} + INTERVAL %({name})s MICROSECOND)"
    return f"%({name})s"


def epoch_sql(connection: BaseDatabaseWrapper, column: str) -> str:
    """SQL of a datetime as seconds since the epoch, on a server clock's database.

    On MySQL a difference from 1970 rather than ``UNIX_TIMESTAMP()``: that one reads a
    ``DATETIME`` in the session's time zone and gives NULL past 2038 on MariaDB before
    11.5 (a long TTL would read as expired)."""
    if connection.vendor == "postgresql":
        return f"date_part('epoch', {column})"
    return f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01', {column}) * 1e-6"
