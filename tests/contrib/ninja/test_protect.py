"""``idempotency.contrib.ninja.protect``: one option for a whole router or API
(tests/testapp/ninja_api.py: the ``protected`` router, the ``whole`` API)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.http import HttpRequest
from django.test import Client
from ninja import NinjaAPI, Router

from idempotency.contrib.ninja import protect
from idempotency.exceptions import ImproperlyApplied
from idempotency.http.views import policy_of
from idempotency.models import IdempotencyRecord
from tests.testapp.executions import executions
from tests.testapp.models import Wallet

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls("tests.urls")]


def twice(client: Client, method: str, url: str, key: str | None) -> list[Any]:
    extra = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    send = getattr(client, method)
    return [
        send(url, data=json.dumps({"amount": 1}), content_type="application/json", **extra)
        for _ in range(2)
    ]


@pytest.mark.parametrize(
    ("method", "url", "status"),
    [
        ("post", "/n/p/orders/", 201),
        ("put", "/n/p/orders/7/", 200),
        ("post", "/n/p/async-orders/", 201),
    ],
)
def test_every_unsafe_operation_of_a_protected_router_replays(
    client_a: Client, wallet: Wallet, execution_log: Path, method: str, url: str, status: int
) -> None:
    key = str(uuid.uuid4())
    first, again = twice(client_a, method, url, key)
    assert first.status_code == status
    assert (again.status_code, again.content, again["Idempotent-Replayed"]) == (
        status,
        first.content,
        "true",
    )
    assert executions(execution_log)[key] == 1


def test_safe_and_exempt_operations_of_a_protected_router_are_left_alone(
    client_a: Client, wallet: Wallet, execution_log: Path
) -> None:
    for _ in range(2):
        assert client_a.get("/n/p/orders/", HTTP_IDEMPOTENCY_KEY="k").json() == []
    assert executions(execution_log)["list"] == 2
    key = str(uuid.uuid4())
    answers = twice(client_a, "post", "/n/p/exempt/", key)
    assert [a.status_code for a in answers] == [201, 201]
    assert executions(execution_log)[key] == 2
    assert not IdempotencyRecord.objects.filter(key=key).exists()


def test_a_decorated_operation_keeps_its_own_options(
    client_a: Client, wallet: Wallet, execution_log: Path
) -> None:
    key = str(uuid.uuid4())
    first, _again = twice(client_a, "post", "/n/p/own/", key)
    record = IdempotencyRecord.objects.get(key=key)
    assert 25 <= (record.expires_at - record.created_at).total_seconds() <= 35  # ttl=30
    assert executions(execution_log)[key] == 1


@pytest.mark.parametrize(
    ("method", "url"), [("post", "/nw/pay/"), ("delete", "/nw/later/orders/3/")]
)
def test_a_whole_api_protected_before_its_routes_covers_them_all(
    wallet: Wallet, execution_log: Path, method: str, url: str
) -> None:
    """``protect(api, required=True)`` ran before the operation and the router existed."""
    client = Client(HTTP_AUTHORIZATION="Bearer token-a")
    missing = twice(client, method, url, None)[0]
    assert missing.status_code == 400
    assert missing.json()["code"] == "idempotency-key-required"
    key = str(uuid.uuid4())
    first, again = twice(client, method, url, key)
    assert first.status_code in (200, 201)
    assert again.content == first.content and again["Idempotent-Replayed"] == "true"
    assert executions(execution_log)[key] == 1


def test_protect_refuses_what_it_cannot_do() -> None:
    with pytest.raises(TypeError, match="unknown options"):
        protect(Router(), tll=3)
    with pytest.raises(ImproperlyApplied, match="NinjaAPI or a ninja.Router"):
        protect(object())
    api = NinjaAPI(urls_namespace=f"late-{uuid.uuid4()}")
    router = Router()
    api.add_router("/", router)
    api.urls  # noqa: B018
    with pytest.raises(ImproperlyApplied, match="api.urls"):
        protect(api)
    with pytest.raises(ImproperlyApplied, match="api.urls"):
        protect(router)


def test_an_async_operation_is_refused_atomic_mode_when_protected() -> None:
    router = Router()

    @router.post("/")
    async def pay(request: HttpRequest) -> dict[str, int]:
        raise AssertionError("never runs")

    with pytest.raises(ImproperlyApplied, match="async"):
        protect(router, mode="atomic")


def test_protect_wraps_the_operations_only_once() -> None:
    router = Router()

    @router.post("/")
    def pay(request: HttpRequest) -> dict[str, int]:
        return {}

    protect(router, ttl=5)
    protect(router, ttl=9)  # already protected: the first options stay
    (operation,) = router.path_operations["/"].operations
    assert policy_of(operation.view_func).ttl == 5
    assert operation.view_func.__wrapped__ is pay
