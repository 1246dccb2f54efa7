"""Without any extra installed, a plain Django project serves keyed views (sync, async,
class-based, under the middleware) and keyed functions, and no integration is imported."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from idempotency import idempotent_function
from tests.no_extras import urls

pytestmark = pytest.mark.django_db

#: What the extras install; none may be importable in this tier.
INTEGRATIONS = ("rest_framework", "ninja", "celery", "prometheus_client", "opentelemetry")
#: The integrations of idempotency.contrib that need an extra (django_tasks needs none).
EXTRAS_CONTRIB = tuple(
    f"idempotency.contrib.{name}" for name in ("drf", "ninja", "celery", "prometheus", "otel")
) + ("idempotency.contrib.openapi.spectacular",)


@pytest.fixture(autouse=True)
def _fresh_runs() -> Iterator[None]:
    urls.RUNS.clear()
    yield


@pytest.fixture
def client() -> Client:
    user = get_user_model().objects.create_user(username=f"u-{uuid.uuid4().hex[:8]}")
    client = Client()
    client.force_login(user)
    return client


def post(client: Client, url: str, key: str, amount: int = 10) -> Any:
    return client.post(
        url, data={"amount": amount}, content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
    )


def test_no_integration_is_installed() -> None:
    """This tier proves what it claims only where the extras are really absent."""
    assert [name for name in INTEGRATIONS if importlib.util.find_spec(name) is not None] == []


@pytest.mark.parametrize(
    ("url", "name"),
    [("/function/", "function"), ("/async/", "async"), ("/class/", "class")],
)
def test_a_keyed_view_runs_once_and_replays(client: Client, url: str, name: str) -> None:
    first = post(client, url, "k-1")
    again = post(client, url, "k-1")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json() == {"view": name, "run": 1, "amount": 10}
    assert again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert urls.RUNS[name] == 1


def test_the_same_key_with_another_body_is_refused(client: Client) -> None:
    assert post(client, "/function/", "k-2", amount=10).status_code == 201
    other = post(client, "/function/", "k-2", amount=99)
    assert other.status_code == 422
    assert other["Content-Type"] == "application/problem+json"
    assert urls.RUNS["function"] == 1


def test_the_middleware_serves_a_plain_view(client: Client) -> None:
    middleware = [
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "idempotency.IdempotencyMiddleware",
    ]
    with override_settings(MIDDLEWARE=middleware):
        client = Client()
        client.force_login(get_user_model().objects.create_user(username="mid"))
        first = post(client, "/middleware/", "k-3")
        again = post(client, "/middleware/", "k-3")
    assert again.json() == first.json() == {"view": "middleware", "run": 1, "amount": 10}
    assert again["Idempotent-Replayed"] == "true"


def test_a_keyed_function_runs_once() -> None:
    calls: list[int] = []

    @idempotent_function(key="charge:{order_id}")
    def charge(order_id: int, amount: int) -> dict[str, int]:
        calls.append(order_id)
        return {"order": order_id, "charged": amount}

    assert charge(order_id=7, amount=5) == {"order": 7, "charged": 5}
    assert charge(order_id=7, amount=5) == {"order": 7, "charged": 5}
    assert calls == [7]


def test_serving_keyed_views_imports_no_integration(client: Client) -> None:
    post(client, "/function/", "k-4")
    post(client, "/function/", "k-4")
    loaded = sorted(
        name
        for name in sys.modules
        if name.split(".")[0] in INTEGRATIONS or name.startswith(EXTRAS_CONTRIB)
    )
    assert loaded == []


@pytest.mark.parametrize(
    ("module", "missing"),
    [
        ("idempotency.contrib.drf.mixins", "rest_framework"),
        ("idempotency.contrib.ninja", "ninja"),
        ("idempotency.contrib.celery", "celery"),
        ("idempotency.contrib.prometheus", "prometheus_client"),
        ("idempotency.contrib.otel", "opentelemetry"),
    ],
)
def test_an_integration_needs_its_extra(module: str, missing: str) -> None:
    with pytest.raises(ModuleNotFoundError) as raised:
        importlib.import_module(module)
    assert raised.value.name is not None
    assert raised.value.name.split(".")[0] == missing
