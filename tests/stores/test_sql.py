"""The SQL of DatabaseStore by vendor (``idempotency.stores.sql``), built from each vendor's
Django backend without a server: every placeholder is a named parameter the store sends,
and "now" is the server's clock wherever there is one.

A placeholder the store does not fill would fail only on its own vendor's server, in
its own CI tier; these tests fail on any machine with the vendor's driver installed.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import ConnectionHandler

from idempotency.models import IdempotencyRecord
from idempotency.stores import sql
from idempotency.stores.database import DatabaseStore
from idempotency.stores.records import StoredResponse

ENGINES = {
    "sqlite": "django.db.backends.sqlite3",
    "postgresql": "django.db.backends.postgresql",
    "mysql": "django.db.backends.mysql",
}
TABLE = IdempotencyRecord._meta.db_table
NAMED = re.compile(r"%\((\w+)\)s")
#: ``%`` followed by anything but a name in parentheses or a literal ``%``
POSITIONAL = re.compile(r"%(?![(%])")


#: The driver each backend loads (psycopg 3, mysqlclient).
DRIVERS = {"sqlite": "sqlite3", "postgresql": "psycopg", "mysql": "MySQLdb"}


def wrapper(vendor: str) -> BaseDatabaseWrapper:
    """A connection wrapper of ``vendor`` (never connected), or a skip without its driver."""
    pytest.importorskip(DRIVERS[vendor], reason=f"needs the {vendor} driver")
    handler = ConnectionHandler({"default": {"ENGINE": ENGINES[vendor], "NAME": "unused"}})
    return handler["default"]


def names(statement: str) -> set[str]:
    assert not POSITIONAL.search(statement), statement
    return set(NAMED.findall(statement))


@pytest.fixture(params=list(ENGINES))
def connection(request: pytest.FixtureRequest) -> BaseDatabaseWrapper:
    return wrapper(request.param)


def sent(connection: BaseDatabaseWrapper) -> dict[str, set[str]]:
    """The parameters DatabaseStore sends with each statement."""
    claim = DatabaseStore._values(
        connection, "user:1", "k", "fp", 7, "POST", "/r", lease=30, ttl=60
    )
    insert: dict[str, Any] = DatabaseStore._values(
        connection, "user:1", "k", "fp", 7, "POST", "/r", lease=None, ttl=60,
        response=StoredResponse(201, [], b"{}"),
    )  # fmt: skip
    if connection.vendor == "mysql":
        insert["lease"] = 0  # its owner read after the upsert asks for it
    complete = {"status_code", "response_headers", "response_body", "mac", "scope", "key"}
    complete |= {"fence", *sql.Clock(connection).params(ttl=60)}
    return {
        "lookup": {"scope", "key"},
        "complete": complete,
        "fresh_claim": set(claim),
        "claim": set(claim),
        "fresh_insert": set(insert),
        "insert": set(insert),
        "owner": set(claim) & set(insert),
    }


def test_every_placeholder_is_a_parameter_the_store_sends(connection: BaseDatabaseWrapper) -> None:
    statements = sql.build(connection, TABLE)
    params = sent(connection)
    for field in dataclasses.fields(statements):
        text = getattr(statements, field.name)
        if text is None:  # the owner read: MySQL's alone
            assert connection.vendor != "mysql"
            continue
        assert names(text) <= params[field.name], (field.name, text)


def test_the_servers_clock_decides_where_there_is_a_server(
    connection: BaseDatabaseWrapper,
) -> None:
    statements = sql.build(connection, TABLE)
    texts = [t for t in dataclasses.astuple(statements) if t is not None]
    clock = sql.Clock(connection).params(ttl=1.5)
    if connection.vendor == "sqlite":  # the application's clock, sent as parameters
        assert all("now" in names(t) for t in texts if not t.startswith("SELECT"))
        assert set(clock) == {"ttl", "now"}
        return
    # PostgreSQL, MySQL and MariaDB: no statement takes "now" from the application
    assert not any("now" in names(t) for t in texts)
    assert all(sql.now_sql(connection) in t for t in texts)
    # the deadlines: seconds on PostgreSQL, whole microseconds on MySQL
    assert clock == ({"ttl": 1_500_000} if connection.vendor == "mysql" else {"ttl": 1.5})


def test_a_claim_meets_a_record_as_its_vendor_can(connection: BaseDatabaseWrapper) -> None:
    """ON CONFLICT … RETURNING on PostgreSQL and SQLite; ON DUPLICATE KEY UPDATE and a
    read of the row it left on MySQL and MariaDB, which have no RETURNING (MySQL 8)."""
    statements = sql.build(connection, TABLE)
    if connection.vendor == "mysql":
        assert "ON DUPLICATE KEY UPDATE" in statements.claim
        assert statements.owner is not None and statements.owner.endswith("FOR UPDATE")
        assert "RETURNING" not in statements.claim
    else:
        assert "DO NOTHING RETURNING 1" in statements.fresh_claim
        assert "ON CONFLICT" in statements.claim and "RETURNING" in statements.claim
        assert statements.owner is None
