"""Strict money: every endpoint takes an amount as a JSON string of ASCII digits, two decimals."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import Account
from accounts.serializer_fields import AmountField
from idempotency import issue_submit_token
from orders.models import Order
from payments.authentication import gateway_signature
from tests.support.factories import OrderFactory
from tests.support.problems import assert_problem

REFUSED: list[Any] = [
    10.5,  # a JSON number
    10,
    "1e3",  # exponent
    "1E3",
    "1_000.00",  # underscore
    "\uff11\uff10.00",  # full-width digits
    "\u0661\u0660.00",  # Arabic-Indic digits
    " 10.00 ",  # whitespace
    "10.00\n",
    "+10.00",
    "-10.00",
    "10.001",  # three decimals
    "10.",
    ".50",
    "1,000.00",
    "NaN",
    "Infinity",
    "0x10",
    "",
    None,
    True,
    ["10.00"],
    {"value": "10.00"},
    "0.00",  # below the minimum
    "10000000000.00",  # above the maximum
]
ACCEPTED = {"10": "10.00", "10.5": "10.50", "10.50": "10.50", "0.01": "0.01", "007.00": "7.00"}


def _order_create(client: APIClient, amount: Any) -> Any:
    return client.post(
        reverse("orders:list"), {"request_id": "r-money", "amount": amount}, format="json"
    )


def _deposit(client: APIClient, amount: Any) -> Any:
    return client.post(reverse("accounts:deposit"), {"amount": amount}, format="json")


def _checkout(client: APIClient, amount: Any) -> Any:
    user = client.handler._force_user
    token = issue_submit_token(user_or_scope=user, purpose="order-form")
    return client.post(
        reverse("orders:checkout"), {"amount": amount}, format="json", HTTP_X_SUBMIT_TOKEN=token
    )


def _callback(client: APIClient, amount: Any) -> Any:
    order = OrderFactory(user=client.handler._force_user)
    body = json.dumps(
        {"trade_no": "T-money", "order_id": order.pk, "amount": amount, "status": "SUCCESS"}
    ).encode()
    anonymous = APIClient(raise_request_exception=False)
    return anonymous.post(
        reverse("payments:callback"),
        body,
        content_type="application/json",
        HTTP_X_GATEWAY_SIGNATURE=gateway_signature(body),
    )


ENDPOINTS = {
    "order-create": _order_create,
    "deposit": _deposit,
    "checkout": _checkout,
    "gateway-callback": _callback,
}


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("amount", REFUSED, ids=repr)
def test_every_endpoint_refuses_a_loose_amount(
    api_client: APIClient, user: User, endpoint: str, amount: Any
) -> None:
    orders_before = Order.objects.count()
    response = ENDPOINTS[endpoint](api_client, amount)
    body = assert_problem(response, 400, "validation-error")
    assert "amount" in body["errors"], body
    # nothing was created or paid, and no money moved
    assert Order.objects.count() == orders_before + (1 if endpoint == "gateway-callback" else 0)
    assert not Account.objects.filter(balance__gt=0).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ["order-create", "deposit", "checkout"])
@pytest.mark.parametrize(("amount", "stored"), ACCEPTED.items())
def test_every_endpoint_accepts_ascii_digits_with_up_to_two_decimals(
    api_client: APIClient, endpoint: str, amount: str, stored: str
) -> None:
    response = ENDPOINTS[endpoint](api_client, amount)
    assert response.status_code == 201, response.content
    assert response.json()["amount"] == stored


def test_the_field_renders_two_decimals() -> None:
    assert AmountField().to_representation(Decimal("7")) == "7.00"
