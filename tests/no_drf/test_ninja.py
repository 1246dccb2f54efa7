"""Django Ninja without Django REST framework: keyed operations run once and replay, a
reused key with another body is refused, ``protect()`` covers a router, and concurrent
duplicates run the body once."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from tests.no_drf import urls
from tests.support.http import new_key, post
from tests.support.storms import Overlap, run_threads, succeeded

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_runs_yet() -> Iterator[None]:
    urls.RUNS.clear()
    urls.INSIDE.clear()
    yield
    urls.INSIDE.clear()


@pytest.fixture
def user() -> Any:
    return get_user_model().objects.create_user(username=f"u-{new_key()[:8]}")


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_drf_is_absent_and_ninja_present() -> None:
    """This tier proves what it claims only where DRF is really absent."""
    assert importlib.util.find_spec("rest_framework") is None
    assert importlib.util.find_spec("ninja") is not None


@pytest.mark.parametrize(("url", "name"), [("/api/pay", "pay"), ("/api/apay", "apay")])
def test_a_keyed_operation_runs_once_and_replays(user: Any, url: str, name: str) -> None:
    client, key = client_of(user), new_key()
    first, again = post(client, url, key=key), post(client, url, key=key)
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.content == first.content
    assert first.json() == {"operation": name, "amount": 5, "run": 1}
    assert again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert urls.RUNS[key] == 1


def test_the_same_key_with_another_body_is_a_problem(user: Any) -> None:
    client, key = client_of(user), new_key()
    assert post(client, "/api/pay", key=key).status_code == 200
    other = post(client, "/api/pay", {"amount": 99}, key=key)
    assert other.status_code == 422
    assert other["Content-Type"] == "application/problem+json"
    assert other.json()["code"] == "idempotency-key-mismatch"
    assert urls.RUNS[key] == 1


def test_each_caller_has_its_own_keys() -> None:
    make = get_user_model().objects.create_user
    alice, bob = client_of(make(username="alice")), client_of(make(username="bob"))
    key = new_key()
    assert post(alice, "/api/pay", {"amount": 1}, key=key).json()["amount"] == 1
    assert post(bob, "/api/pay", {"amount": 2}, key=key).json()["amount"] == 2
    assert urls.RUNS[key] == 2


def test_a_protected_router_requires_a_key_and_replays(user: Any) -> None:
    client, key = client_of(user), new_key()
    missing = post(client, "/api/protected/refund")
    assert missing.status_code == 400
    assert missing["Content-Type"] == "application/problem+json"
    first, again = (post(client, "/api/protected/refund", key=key) for _ in range(2))
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"
    assert client.get("/api/protected/balance").json() == {"runs": 1}
    assert dict(urls.RUNS) == {key: 1}


@pytest.mark.skipif(
    connection.vendor == "sqlite",
    reason="threads share no in-memory SQLite database: the storm needs DATABASE_URL "
    "(PostgreSQL in CI's core stream)",
)
def test_concurrent_duplicates_run_the_body_once(user: Any) -> None:
    racers, key = 8, new_key()
    overlap = Overlap(racers)
    urls.INSIDE.append(overlap.hold)

    def fire(_index: int) -> Any:
        return overlap.call(post, client_of(user), "/api/pay", key=key)

    statuses = sorted(answer.status_code for answer in succeeded(run_threads(racers, fire)))
    assert urls.RUNS[key] == 1
    assert statuses.count(200) >= 1
    assert set(statuses) <= {200, 409}
    replay = post(client_of(user), "/api/pay", key=key)
    assert replay["Idempotent-Replayed"] == "true"
    assert urls.RUNS[key] == 1
