"""No existence leaks: a second user learns nothing about, and blocks nothing of, the first.

For every endpoint: mallory's answer about alice's things is the answer about things
that do not exist (same status, same bytes), and nothing mallory does stops alice.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.models import Account
from idempotency import issue_submit_token
from orders.models import Order, OrderStatus
from payments.models import PaymentRecord
from tests.support.api_clients import keyed_client
from tests.support.factories import OrderFactory, funded_account
from tests.support.problems import assert_problem

pytestmark = pytest.mark.django_db

ORDERS = "/api/orders/"
MISSING = 987654


@pytest.fixture
def alice(user: User) -> User:
    funded_account("100.00", user=user)
    return user


@pytest.fixture
def mallory(other_user: User) -> User:
    funded_account("100.00", user=other_user)
    return other_user


@pytest.fixture
def as_mallory(mallory: User) -> APIClient:
    return keyed_client(mallory)


@pytest.fixture
def alices_paid_order(api_client: APIClient, alice: User) -> Order:
    order = OrderFactory(user=alice, request_id="r-2001", amount=Decimal("40.00"))
    response = api_client.post(f"{ORDERS}{order.pk}/pay/", {"pay_no": "PAY-3"}, format="json")
    assert response.status_code == 201
    order.refresh_from_db()
    return order


def same_answer(foreign: object, missing: object) -> None:
    assert foreign.status_code == missing.status_code  # type: ignore[attr-defined]
    assert foreign.content == missing.content  # type: ignore[attr-defined]


@pytest.mark.parametrize("action", ["", "cancel/", "pay/"])
def test_order_endpoints_answer_a_foreign_order_like_a_missing_one(
    as_mallory: APIClient, alices_paid_order: Order, action: str
) -> None:
    method = as_mallory.get if not action else as_mallory.post
    for pay_no in ("PAY-3", "PAY-fresh", "not a pay number!"):
        foreign = method(f"{ORDERS}{alices_paid_order.pk}/{action}", {"pay_no": pay_no})
        missing = method(f"{ORDERS}{MISSING}/{action}", {"pay_no": pay_no})
        assert_problem(foreign, 404, "not-found")
        same_answer(foreign, missing)
    alices_paid_order.refresh_from_db()
    assert alices_paid_order.status == OrderStatus.PAID


@pytest.mark.parametrize("action", ["ship/", "complete/"])
def test_fulfilment_is_403_for_customers_whatever_the_order(
    as_mallory: APIClient, alices_paid_order: Order, action: str
) -> None:
    foreign = as_mallory.post(f"{ORDERS}{alices_paid_order.pk}/{action}")
    missing = as_mallory.post(f"{ORDERS}{MISSING}/{action}")
    assert_problem(foreign, 403, "permission-denied")
    same_answer(foreign, missing)


def test_request_ids_neither_leak_nor_block(
    api_client: APIClient, as_mallory: APIClient, alices_paid_order: Order
) -> None:
    # mallory posting alice's request id gets an order of her own, not a conflict
    taken = as_mallory.post(ORDERS, {"request_id": "r-2001", "amount": "1.00"}, format="json")
    assert taken.status_code == 201
    assert taken.json()["id"] != alices_paid_order.pk
    # and squatting ids alice has not used yet blocks nothing
    squat = as_mallory.post(ORDERS, {"request_id": "r-2002", "amount": "1.00"}, format="json")
    assert squat.status_code == 201
    mine = api_client.post(ORDERS, {"request_id": "r-2002", "amount": "9.00"}, format="json")
    assert mine.status_code == 201
    assert Order.objects.get(pk=mine.json()["id"]).user == alices_paid_order.user
    assert Order.objects.filter(request_id="r-2002").count() == 2


def test_pay_numbers_neither_leak_nor_block(
    api_client: APIClient, as_mallory: APIClient, alice: User, alices_paid_order: Order
) -> None:
    her_order = Order.objects.get(
        pk=as_mallory.post(ORDERS, {"request_id": "m-1", "amount": "5.00"}, format="json").json()[
            "id"
        ]
    )
    # alice's pay number pays mallory's own order: no 409, no hint it exists
    paid = as_mallory.post(f"{ORDERS}{her_order.pk}/pay/", {"pay_no": "PAY-3"}, format="json")
    assert paid.status_code == 201
    # a number mallory used first stays free for alice
    squat = as_mallory.post(ORDERS, {"request_id": "m-2", "amount": "5.00"}, format="json").json()[
        "id"
    ]
    as_mallory.post(f"{ORDERS}{squat}/pay/", {"pay_no": "PAY-4"}, format="json")
    second = OrderFactory(user=alice, amount=Decimal("1.00"))
    mine = api_client.post(f"{ORDERS}{second.pk}/pay/", {"pay_no": "PAY-4"}, format="json")
    assert mine.status_code == 201
    assert PaymentRecord.objects.filter(pay_no="PAY-4").count() == 2


def test_payment_detail_answers_a_foreign_pay_no_like_a_missing_one(
    as_mallory: APIClient, alices_paid_order: Order
) -> None:
    foreign = as_mallory.get("/api/payments/PAY-3/")
    missing = as_mallory.get("/api/payments/PAY-none/")
    assert_problem(foreign, 404, "not-found")
    same_answer(foreign, missing)
    assert as_mallory.get("/api/payments/").json() == []


def test_account_endpoints_show_only_the_caller(
    api_client: APIClient, as_mallory: APIClient, alice: User, mallory: User
) -> None:
    # a reference alice used is mallory's to use too (references are per account)
    deposit = {"amount": "1.00", "reference": "initial-2"}
    assert api_client.post("/api/accounts/me/deposit/", deposit, format="json").status_code == 201
    assert as_mallory.post("/api/accounts/me/deposit/", deposit, format="json").status_code == 201
    me = as_mallory.get("/api/accounts/me/").json()
    assert me["id"] == Account.objects.get(user=mallory).pk
    ledger = as_mallory.get("/api/accounts/me/ledger/").json()
    assert Account.objects.get(user=alice).ledger_entries.count() == 2
    assert {entry["reference"] for entry in ledger} == {"initial", "initial-2"}
    assert len(ledger) == 2


def test_a_foreign_submit_token_is_answered_like_an_unknown_one(
    as_mallory: APIClient, alice: User
) -> None:
    alices = issue_submit_token(user_or_scope=alice, purpose="order-form")
    foreign = as_mallory.post(
        f"{ORDERS}checkout/", {"amount": "1.00"}, format="json", HTTP_X_SUBMIT_TOKEN=alices
    )
    unknown = as_mallory.post(
        f"{ORDERS}checkout/", {"amount": "1.00"}, format="json", HTTP_X_SUBMIT_TOKEN="x" * 43
    )
    assert_problem(foreign, 400, "submit-token-invalid")
    same_answer(foreign, unknown)
    assert not Order.objects.filter(user__username="mallory").exists()
