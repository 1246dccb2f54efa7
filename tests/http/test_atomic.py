"""Atomic mode and a view that writes to two PostgreSQL databases.

By default atomic mode wraps only the store's database: a released outcome (a 5xx)
rolls that back but leaves the other database's writes behind, for the retry to
double (system check W006 warns about it). ``databases=[...]`` wraps every alias
the view names: all commit with the record, or none does.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from idempotency.checks import check_settings
from tests.support.http import post
from tests.support.storms import storm
from tests.support.users import logged_in_client
from tests.testapp.executions import ENV, executions
from tests.testapp.models import Effect, Wallet

pytestmark = [
    pytest.mark.server_db,
    pytest.mark.django_db(transaction=True, databases=["default", "ledger"]),
]


def rows(alias: str) -> int:
    return Effect.objects.using(alias).count()


def test_a_released_key_leaves_nothing_in_either_database(client_a: Client, wallet: Wallet) -> None:
    failed = post(client_a, "/t/two-databases/?fail=1", key="k1")
    assert failed.status_code == 500
    assert (rows("default"), rows("ledger")) == (0, 0)
    retry = post(client_a, "/t/two-databases/?fail=1".replace("?fail=1", ""), key="k2")
    assert retry.status_code == 201
    assert (rows("default"), rows("ledger")) == (1, 1)
    assert post(client_a, "/t/two-databases/", key="k2")["Idempotent-Replayed"] == "true"
    assert (rows("default"), rows("ledger")) == (1, 1)


def test_without_databases_the_other_alias_keeps_a_released_attempts_writes(
    client_a: Client, wallet: Wallet
) -> None:
    """What the check warns about: the store's database rolls back, the other does not."""
    assert "idempotency.W006" in [m.id for m in check_settings()]
    assert post(client_a, "/t/store-database-only/?fail=1", key="k3").status_code == 500
    assert (rows("default"), rows("ledger")) == (0, 1)


def test_concurrent_duplicates_write_each_database_once(
    user: Any, wallet: Wallet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "executions.log"
    monkeypatch.setenv(ENV, str(log))
    key = str(uuid.uuid4())
    responses = storm(
        lambda: logged_in_client(user), "/t/two-databases/?sleep=0.05", key, {"amount": 5}, 20
    )
    assert Counter(r.status_code for r in responses) == {201: 20}
    assert executions(log)[key] == 1
    assert (rows("default"), rows("ledger")) == (1, 1)
    assert Wallet.objects.get().balance == 995
