"""Fixtures of the HTTP-contract tests: users, clients, a funded wallet, store variants."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token

from tests.testapp.executions import ENV
from tests.testapp.models import Wallet

DB = "idempotency.stores.DatabaseStore"

#: every store and mode the HTTP layer runs on; ids are used in test names
STORE_VARIANTS: dict[str, dict[str, Any]] = {
    "db-atomic": {"STORE": DB, "MODE": "atomic"},
    "db-lease": {"STORE": DB, "MODE": "lease"},
    "db-cached": {"STORE": DB, "MODE": "atomic", "RESPONSE_CACHE": "default"},
    "redis": {"STORE": "idempotency.stores.RedisStore", "MODE": "lease"},
    "cache": {"STORE": "idempotency.stores.CacheStore", "MODE": "lease"},
}


def variant_params() -> list[Any]:
    params = []
    for name in STORE_VARIANTS:
        marks = [pytest.mark.redis] if name == "redis" else []
        params.append(pytest.param(name, id=name, marks=marks))
    return params


@pytest.fixture(params=variant_params())
def store_variant(request: pytest.FixtureRequest) -> Iterator[str]:
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[request.param]):
        yield request.param


@pytest.fixture
def urls() -> None:
    """Marker fixture: the tests here route to tests.testapp.urls."""


@pytest.fixture(autouse=True)
def _testapp_urls(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.core.urls"


def make_user(username: str) -> Any:
    user = get_user_model().objects.create_user(username=username, password="pw")
    Token.objects.get_or_create(user=user)
    return user


def token_client(user: Any) -> Client:
    token = Token.objects.get(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token.key}", enforce_csrf_checks=False)


@pytest.fixture
def user(db: Any) -> Any:
    return make_user("alice")


@pytest.fixture
def other_user(db: Any) -> Any:
    return make_user("bob")


@pytest.fixture
def client_a(user: Any) -> Client:
    client = token_client(user)
    client.force_login(user)
    return client


@pytest.fixture
def client_b(other_user: Any) -> Client:
    client = token_client(other_user)
    client.force_login(other_user)
    return client


@pytest.fixture
def wallet(db: Any) -> Wallet:
    return Wallet.objects.create(pk=1, balance=1000)


@pytest.fixture
def execution_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The file each view body appends its Idempotency-Key to (see tests.testapp.executions)."""
    path = tmp_path / "executions.log"
    monkeypatch.setenv(ENV, str(path))
    yield path
