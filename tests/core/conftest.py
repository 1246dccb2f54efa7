"""Fixtures of the HTTP-contract tests: users, clients, a funded wallet, store variants."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db.models import F
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token

from idempotency.models import IdempotencyRecord
from tests.testapp import views
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


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[views.Gate]:
    """A fresh gate for ``?hold=1`` bodies; released at the end so no body is left waiting."""
    fresh = views.Gate()
    monkeypatch.setattr(views, "HOLD", fresh)
    yield fresh
    fresh.release.set()


@pytest.fixture
def age_records() -> Callable[[str, float], None]:
    """The database store's clock, moved on for one key: ``age_records(key, seconds)`` moves
    its records' creation, lease and expiry ``seconds`` into the past, as if that much time
    had passed (on the application's clock and PostgreSQL's alike), without a sleep."""

    def age(key: str, seconds: float) -> None:
        delta = timedelta(seconds=seconds)
        IdempotencyRecord.objects.filter(key=key).update(
            created_at=F("created_at") - delta,
            expires_at=F("expires_at") - delta,
            lease_expires_at=F("lease_expires_at") - delta,
        )

    return age
