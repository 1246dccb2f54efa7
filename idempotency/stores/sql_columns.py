"""The record's columns in SQL, for every vendor: what an insert writes (a claim or a
completed record) and what a lookup reads.
"""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

from idempotency.stores.sql_clock import SERVER_CLOCK_VENDORS, epoch_sql, later_sql, now_sql

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


def lookup_columns(connection: BaseDatabaseWrapper) -> list[str]:
    """What a lookup selects: :data:`LOOKUP_FIELDS`, and on a server clock's database the
    datetimes as seconds since the epoch and the server's "now" last."""
    qn = connection.ops.quote_name
    if connection.vendor not in SERVER_CLOCK_VENDORS:
        return [qn(c) for c in LOOKUP_FIELDS]
    columns = [epoch_sql(connection, qn(c)) if c in EPOCH_FIELDS else qn(c) for c in LOOKUP_FIELDS]
    columns.append(epoch_sql(connection, now_sql(connection)))
    return columns


def insert_values(connection: BaseDatabaseWrapper, *, claim: bool) -> list[str]:
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
    return [fixed.get(column, f"%({column})s") for column in COLUMNS]


def insert(connection: BaseDatabaseWrapper, table: str, *, claim: bool) -> str:
    qn = connection.ops.quote_name
    columns = ", ".join(qn(c) for c in COLUMNS)
    values = ", ".join(insert_values(connection, claim=claim))
    return f"INSERT INTO {qn(table)} ({columns}) VALUES ({values})"
