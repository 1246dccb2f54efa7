"""The sample's write endpoints under Idempotency-Key: required where money moves."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from orders.models import Order
from payments.models import PaymentRecord
from tests.support.factories import OrderFactory, TokenFactory, UserFactory, funded_account
from tests.support.storms import run_threads

pytestmark = pytest.mark.django_db(transaction=True)


def key() -> str:
    return str(uuid.uuid4())


def problem_code(response: Any) -> str:
    assert response["Content-Type"] == "application/problem+json"
    return str(json.loads(response.content)["code"])


def test_pay_and_deposit_require_a_key(api_client: APIClient, user: Any) -> None:
    funded_account(user=user, balance=Decimal("100.00"))
    order = OrderFactory(user=user, amount=Decimal("10.00"))
    pay = api_client.post(
        f"/api/orders/{order.pk}/pay/", {"pay_no": "p1"}, format="json", HTTP_IDEMPOTENCY_KEY=None
    )
    deposit = api_client.post(
        "/api/accounts/me/deposit/", {"amount": "5.00"}, format="json", HTTP_IDEMPOTENCY_KEY=None
    )
    assert pay.status_code == deposit.status_code == 400
    assert problem_code(pay) == problem_code(deposit) == "idempotency-key-required"
    assert not PaymentRecord.objects.exists()
    assert Account.objects.get(user=user).balance == Decimal("100.00")


def test_order_create_takes_an_optional_key(api_client: APIClient) -> None:
    def create(request_id: str, idempotency_key: str | None) -> Any:
        body = {"request_id": request_id, "amount": "3.00"}
        return api_client.post(
            "/api/orders/", body, format="json", HTTP_IDEMPOTENCY_KEY=idempotency_key
        )

    without = create("r1", None)
    assert without.status_code == 201
    assert "Idempotent-Replayed" not in without
    k = key()
    first = create("r2", k)
    again = create("r2", k)
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    mismatch = create("r3", k)
    assert mismatch.status_code == 422
    assert problem_code(mismatch) == "idempotency-key-mismatch"
    assert sorted(Order.objects.values_list("request_id", flat=True)) == ["r1", "r2"]


def test_deposit_without_reference_happens_once_per_key(api_client: APIClient, user: Any) -> None:
    k = key()
    first = api_client.post(
        "/api/accounts/me/deposit/", {"amount": "5.00"}, format="json", HTTP_IDEMPOTENCY_KEY=k
    )
    again = api_client.post(
        "/api/accounts/me/deposit/", {"amount": "5.00"}, format="json", HTTP_IDEMPOTENCY_KEY=k
    )
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert Account.objects.get(user=user).balance == Decimal("5.00")
    other = api_client.post(
        "/api/accounts/me/deposit/", {"amount": "6.00"}, format="json", HTTP_IDEMPOTENCY_KEY=k
    )
    assert other.status_code == 422
    assert problem_code(other) == "idempotency-key-mismatch"


def test_pay_replay_answers_identically(api_client: APIClient, user: Any) -> None:
    funded_account(user=user, balance=Decimal("100.00"))
    order = OrderFactory(user=user, amount=Decimal("10.00"))
    k = key()
    first = api_client.post(
        f"/api/orders/{order.pk}/pay/", {"pay_no": "p1"}, format="json", HTTP_IDEMPOTENCY_KEY=k
    )
    again = api_client.post(
        f"/api/orders/{order.pk}/pay/", {"pay_no": "p1"}, format="json", HTTP_IDEMPOTENCY_KEY=k
    )
    assert first.status_code == 201
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"
    assert Account.objects.get(user=user).balance == Decimal("90.00")


def test_insufficient_funds_is_not_stored_so_a_retry_can_succeed(
    api_client: APIClient, user: Any
) -> None:
    order = OrderFactory(user=user, amount=Decimal("10.00"))
    k = key()
    poor = api_client.post(
        f"/api/orders/{order.pk}/pay/", {"pay_no": "p1"}, format="json", HTTP_IDEMPOTENCY_KEY=k
    )
    assert poor.status_code == 409
    api_client.post("/api/accounts/me/deposit/", {"amount": "50.00"}, format="json")
    paid = api_client.post(
        f"/api/orders/{order.pk}/pay/", {"pay_no": "p1"}, format="json", HTTP_IDEMPOTENCY_KEY=k
    )
    assert paid.status_code == 201
    assert Order.objects.get().status == "PAID"


@pytest.mark.server_db
def test_concurrent_deposits_with_one_key_deposit_once(user: Any) -> None:
    token = TokenFactory(user=UserFactory(username="carol"))
    k = key()

    def deposit(_: int) -> Any:
        client = APIClient(raise_request_exception=False)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        return client.post(
            "/api/accounts/me/deposit/", {"amount": "5.00"}, format="json", HTTP_IDEMPOTENCY_KEY=k
        )

    responses = run_threads(20, deposit)
    statuses = sorted(getattr(r, "status_code", 0) for r in responses)
    assert set(statuses) <= {201, 409}, statuses
    assert LedgerEntry.objects.filter(account__user=token.user).count() == 1
    assert Account.objects.get(user=token.user).balance == Decimal("5.00")
