"""The databases behind DatabaseStore and atomic mode (idempotency.checks.databases): E015,
E017, W006, E030, and tenants under the default scope: W050, W051."""

from __future__ import annotations

import importlib.util
from io import StringIO
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from idempotency.checks import check_settings
from idempotency.checks.databases import TENANTS_ENGINE
from tests.support.checks import check_messages, ids, only, two_databases
from tests.support.stores import (
    CACHE_STORE,
    DB_STORE,
    REDIS_STORE,
    locks_using,
    tokens_using,
    using,
)


def test_e015_database_option_not_in_databases() -> None:
    only("E015", IDEMPOTENCY=using(DB_STORE, database="records"))
    only("E015", IDEMPOTENCY=tokens_using("database", database="records"))
    only("E015", IDEMPOTENCY=locks_using("postgres", database="records"))
    (message,) = check_messages(IDEMPOTENCY=using(DB_STORE, database="records"))
    assert "IDEMPOTENCY['STORES']['default']['OPTIONS']['database']" in message.msg


def test_e017_atomic_databases() -> None:
    only("E017", IDEMPOTENCY={"ATOMIC_DATABASES": ["nope"]}, DATABASES=two_databases())


def test_w006_a_database_outside_atomic_modes_transaction() -> None:
    only("W006", DATABASES=two_databases())
    assert ids(IDEMPOTENCY={"ATOMIC_DATABASES": ["ledger"]}, DATABASES=two_databases()) == []
    # lease mode has no transaction to leave anything out of
    assert ids(IDEMPOTENCY={"MODE": "lease"}, DATABASES=two_databases()) == []


OTHER_VENDOR = "tests.testapp.otherdb"


def _databases(engine: str) -> dict[str, Any]:
    """The one database ``default``, on ``engine`` (nothing connects: the check reads the
    backend's ``vendor``)."""
    return {"default": {"ENGINE": engine, "NAME": "records"}}


def test_e030_a_database_store_on_a_vendor_it_has_no_sql_for() -> None:
    with override_settings(IDEMPOTENCY={}, DATABASES=_databases(OTHER_VENDOR)):
        messages = [m for m in check_settings() if m.id == "idempotency.E030"]
    assert len(messages) == 1
    text = messages[0].msg + messages[0].hint
    assert "'othervendor'" in text and OTHER_VENDOR in text and "'default'" in text
    assert "RedisStore" in text and "CacheStore" in text


@pytest.mark.parametrize(
    "engine",
    [
        "django.db.backends.sqlite3",
        "django.db.backends.postgresql",
        pytest.param(
            "django.db.backends.mysql",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("MySQLdb") is None, reason="mysqlclient not installed"
            ),
        ),
    ],
)
def test_e030_not_on_the_vendors_with_sql(engine: str) -> None:
    """The same configuration on a database the store has SQL for passes."""
    assert ids(IDEMPOTENCY={}, DATABASES=_databases(engine)) == []


@pytest.mark.parametrize("store", [REDIS_STORE, CACHE_STORE])
def test_e030_not_for_stores_without_sql(store: str) -> None:
    """RedisStore and CacheStore, the stores the message names, are not judged by it
    (their own checks, on their caches, still run)."""
    found = ids(IDEMPOTENCY=using(store), DATABASES=_databases(OTHER_VENDOR))
    assert "idempotency.E030" not in found


def test_e030_names_a_store_on_another_database() -> None:
    databases = {
        "default": django_settings.DATABASES["default"],
        "legacy": _databases(OTHER_VENDOR)["default"],
    }
    with override_settings(IDEMPOTENCY=using(DB_STORE, database="legacy"), DATABASES=databases):
        messages = [m for m in check_settings() if m.id == "idempotency.E030"]
    assert len(messages) == 1 and "'legacy'" in messages[0].msg


def test_check_command_fails_on_a_database_store_without_sql() -> None:
    with (
        override_settings(IDEMPOTENCY={}, DATABASES=_databases(OTHER_VENDOR)),
        pytest.raises(SystemCheckError, match=r"idempotency\.E030"),
    ):
        call_command("check", databases=[])


# -- issue 43, finding 4: tenants under the default scope ---------------------------------


class ReadsAndWritesDefault:
    """A router that routes nothing anywhere else (any router counts for W051)."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return "default"


ROUTERS = [f"{__name__}.ReadsAndWritesDefault"]
TENANTS = {"default": {**django_settings.DATABASES["default"], "ENGINE": TENANTS_ENGINE}}


def _reported(**overrides: Any) -> str:
    """What ``manage.py check`` prints under ``overrides`` (warnings do not fail it)."""
    out, err = StringIO(), StringIO()
    with override_settings(**overrides):
        call_command("check", databases=[], stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def test_w050_django_tenants_under_the_default_scope() -> None:
    only("W050", DATABASES=TENANTS)
    # with a scope that names the tenant's schema: quiet
    tenant = {"SCOPE": "idempotency.scopes.tenant_schema_scope"}
    assert ids(IDEMPOTENCY=tenant, DATABASES=TENANTS) == []
    assert "idempotency.W050" in _reported(DATABASES=TENANTS)


def test_w051_database_routers_under_the_default_scope() -> None:
    only("W051", DATABASE_ROUTERS=ROUTERS)
    mine = {"SCOPE": "idempotency.scopes.tenant_schema_scope"}
    assert ids(IDEMPOTENCY=mine, DATABASE_ROUTERS=ROUTERS) == []
    assert ids(DATABASES=TENANTS, DATABASE_ROUTERS=ROUTERS) == ["idempotency.W050"]
    assert "idempotency.W051" in _reported(DATABASE_ROUTERS=ROUTERS)
