"""HTTP API of the payments app (paying is routed at ``/api/orders/{id}/pay/``)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.services import account_deposit, account_get_or_create_for_user
from orders.models import Order, OrderStatus
from payments.models import PaymentRecord
from tests.support.factories import OrderFactory
from tests.support.problems import assert_problem

PAYMENTS = "/api/payments/"


def pay_url(order: Order) -> str:
    return f"/api/orders/{order.pk}/pay/"


@pytest.fixture
def account(user: User) -> Account:
    account = account_get_or_create_for_user(user=user)
    account_deposit(account_id=account.pk, amount=Decimal("100.00"), reference="initial")
    return account


@pytest.fixture
def order(user: User, account: Account) -> Order:
    return OrderFactory(user=user, amount=Decimal("40.00"))


def test_pay_answers_201_with_the_payment(api_client: APIClient, order: Order) -> None:
    response = api_client.post(pay_url(order), {"pay_no": "P-1"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"pay_no", "order_id", "amount", "status", "created_at"}
    assert (body["pay_no"], body["order_id"], body["amount"], body["status"]) == (
        "P-1",
        order.pk,
        "40.00",
        "SUCCEEDED",
    )
    assert api_client.get(f"/api/orders/{order.pk}/").json()["status"] == "PAID"
    assert api_client.get("/api/accounts/me/").json()["balance"] == "60.00"


def test_repeat_answers_the_same_status_and_bytes(api_client: APIClient, order: Order) -> None:
    first = api_client.post(pay_url(order), {"pay_no": "P-1"}, format="json")
    again = api_client.post(pay_url(order), {"pay_no": "P-1"}, format="json")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.content == first.content
    assert api_client.get("/api/accounts/me/").json()["balance"] == "60.00"
    assert PaymentRecord.objects.count() == 1


def test_second_pay_no_is_409_order_not_payable(api_client: APIClient, order: Order) -> None:
    api_client.post(pay_url(order), {"pay_no": "P-1"}, format="json")
    response = api_client.post(pay_url(order), {"pay_no": "P-2"}, format="json")
    assert_problem(response, 409, "order-not-payable")
    assert api_client.get("/api/accounts/me/").json()["balance"] == "60.00"


def test_pay_no_reused_for_another_order_is_409(
    api_client: APIClient, order: Order, user: User
) -> None:
    api_client.post(pay_url(order), {"pay_no": "P-1"}, format="json")
    other = OrderFactory(user=user)
    response = api_client.post(pay_url(other), {"pay_no": "P-1"}, format="json")
    assert_problem(response, 409, "payment-conflict")
    other.refresh_from_db()
    assert other.status == OrderStatus.CREATED


def test_insufficient_funds_is_409_and_changes_nothing(
    api_client: APIClient, user: User, account: Account
) -> None:
    order = OrderFactory(user=user, amount=Decimal("100.01"))
    response = api_client.post(pay_url(order), {"pay_no": "P-1"}, format="json")
    assert_problem(response, 409, "insufficient-funds")
    order.refresh_from_db()
    assert order.status == OrderStatus.CREATED
    assert PaymentRecord.objects.count() == 0
    assert LedgerEntry.objects.count() == 1
    assert api_client.get(PAYMENTS).json() == []


def test_list_and_detail_show_only_the_callers_payments(
    api_client: APIClient, order: Order, user: User, other_user: User
) -> None:
    paid = api_client.post(pay_url(order), {"pay_no": "P-1"}, format="json")
    second = OrderFactory(user=user, amount=Decimal("1.00"))
    api_client.post(pay_url(second), {"pay_no": "P-2"}, format="json")
    listed = api_client.get(PAYMENTS)
    assert listed.status_code == 200
    assert [p["pay_no"] for p in listed.json()] == ["P-2", "P-1"]
    detail = api_client.get(f"{PAYMENTS}P-1/")
    assert detail.status_code == 200
    assert detail.content == paid.content

    stranger = APIClient(raise_request_exception=False)
    stranger.force_authenticate(user=other_user)
    assert stranger.get(PAYMENTS).json() == []
    assert_problem(stranger.get(f"{PAYMENTS}P-1/"), 404, "not-found")


@pytest.mark.parametrize("pay_no", ["missing", "x" * 61, "bad%20no", "a%00b", "%C3%BC"])
def test_unknown_or_malformed_pay_numbers_are_404(api_client: APIClient, pay_no: str) -> None:
    assert_problem(api_client.get(f"{PAYMENTS}{pay_no}/"), 404, "not-found")


BAD_PAYS: list[tuple[str, Any]] = [
    ("empty", {}),
    ("pay_no empty", {"pay_no": ""}),
    ("pay_no too long", {"pay_no": "p" * 61}),
    ("pay_no spaces", {"pay_no": "p 1"}),
    ("pay_no nul", {"pay_no": "p\x00"}),
    ("pay_no null", {"pay_no": None}),
    ("pay_no list", {"pay_no": ["P-1"]}),
    ("body list", ["P-1"]),
]


@pytest.mark.parametrize(("case", "payload"), BAD_PAYS, ids=[c for c, _ in BAD_PAYS])
def test_bad_pay_requests_are_400(
    api_client: APIClient, order: Order, case: str, payload: Any
) -> None:
    response = api_client.post(pay_url(order), json.dumps(payload), content_type="application/json")
    assert_problem(response, 400, "validation-error")
    order.refresh_from_db()
    assert order.status == OrderStatus.CREATED


def test_malformed_json_is_400(api_client: APIClient, order: Order) -> None:
    response = api_client.post(pay_url(order), b"{pay_no", content_type="application/json")
    assert_problem(response, 400, "parse-error")
