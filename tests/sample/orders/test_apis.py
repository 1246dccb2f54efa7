"""HTTP API of the orders app."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from orders.models import Order, OrderStatus
from tests.support.factories import OrderFactory
from tests.support.problems import assert_problem

ORDERS = "/api/orders/"
ORDER_FIELDS = {"id", "request_id", "amount", "status", "created_at", "updated_at", "paid_at"}


def order_url(pk: int, action: str = "") -> str:
    return f"{ORDERS}{pk}/{action + '/' if action else ''}"


def test_create_answers_201_with_the_order(api_client: APIClient, user: User) -> None:
    response = api_client.post(ORDERS, {"request_id": "req-1", "amount": "9.9"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == ORDER_FIELDS
    assert (body["request_id"], body["amount"], body["status"], body["paid_at"]) == (
        "req-1",
        "9.90",
        "CREATED",
        None,
    )
    order = Order.objects.get()
    assert (order.pk, order.user_id) == (body["id"], user.pk)


def test_repeat_answers_the_same_status_and_bytes(api_client: APIClient) -> None:
    payload = {"request_id": "req-1", "amount": "9.90"}
    first = api_client.post(ORDERS, payload, format="json")
    again = api_client.post(ORDERS, payload, format="json")
    same_value = api_client.post(ORDERS, {"request_id": "req-1", "amount": "9.9"}, format="json")
    assert first.status_code == again.status_code == same_value.status_code == 201
    assert again.content == first.content
    assert same_value.content == first.content
    assert Order.objects.count() == 1


def test_request_id_with_another_amount_is_409(api_client: APIClient) -> None:
    api_client.post(ORDERS, {"request_id": "req-1", "amount": "9.90"}, format="json")
    response = api_client.post(ORDERS, {"request_id": "req-1", "amount": "9.91"}, format="json")
    assert_problem(response, 409, "order-request-conflict")
    assert Order.objects.get().amount == Decimal("9.90")


def test_request_id_of_another_user_names_a_new_order_of_the_caller(
    api_client: APIClient, user: User, other_user: User
) -> None:
    theirs = OrderFactory(user=other_user, request_id="req-1", amount=Decimal("9.90"))
    response = api_client.post(ORDERS, {"request_id": "req-1", "amount": "5.00"}, format="json")
    assert response.status_code == 201
    mine = Order.objects.get(pk=response.json()["id"])
    assert (mine.user_id, mine.amount) == (user.pk, Decimal("5.00"))
    assert mine.pk != theirs.pk


def test_list_shows_only_the_callers_orders_newest_first(
    api_client: APIClient, user: User, other_user: User
) -> None:
    older = OrderFactory(user=user)
    OrderFactory(user=other_user)
    newer = OrderFactory(user=user)
    response = api_client.get(ORDERS)
    assert response.status_code == 200
    assert [o["id"] for o in response.json()] == [newer.pk, older.pk]


def test_detail(api_client: APIClient, user: User) -> None:
    order = OrderFactory(user=user, amount=Decimal("3"))
    response = api_client.get(order_url(order.pk))
    assert response.status_code == 200
    assert response.json()["amount"] == "3.00"


@pytest.mark.parametrize("action", ["", "cancel", "pay"])
def test_other_users_orders_are_404(api_client: APIClient, other_user: User, action: str) -> None:
    order = OrderFactory(user=other_user)
    method = api_client.post if action else api_client.get
    assert_problem(method(order_url(order.pk, action), {"pay_no": "P-1"}), 404, "not-found")
    order.refresh_from_db()
    assert order.status == OrderStatus.CREATED


@pytest.mark.parametrize("pk", [0, 987654, 2**63, 10**30])
@pytest.mark.parametrize("action", ["", "cancel", "pay"])
def test_unknown_orders_are_404(api_client: APIClient, pk: int, action: str) -> None:
    method = api_client.post if action else api_client.get
    assert_problem(method(order_url(pk, action), {"pay_no": "P-1"}), 404, "not-found")


def test_cancel_and_its_repeat(api_client: APIClient, user: User) -> None:
    order = OrderFactory(user=user)
    first = api_client.post(order_url(order.pk, "cancel"))
    again = api_client.post(order_url(order.pk, "cancel"))
    assert (first.status_code, again.status_code) == (200, 200)
    assert first.json()["status"] == "CANCELLED"
    assert again.content == first.content


def test_staff_ship_and_complete_a_paid_order(
    api_client: APIClient, staff_client: APIClient, user: User
) -> None:
    order = OrderFactory(user=user, status=OrderStatus.PAID)
    assert staff_client.post(order_url(order.pk, "ship")).json()["status"] == "SHIPPED"
    assert staff_client.post(order_url(order.pk, "complete")).json()["status"] == "COMPLETED"
    assert api_client.get(order_url(order.pk)).json()["status"] == "COMPLETED"


@pytest.mark.parametrize("action", ["ship", "complete"])
@pytest.mark.parametrize("whose", ["own", "foreign", "missing"])
def test_a_customer_may_not_ship_or_complete_any_order(
    api_client: APIClient, user: User, other_user: User, action: str, whose: str
) -> None:
    status = OrderStatus.PAID if action == "ship" else OrderStatus.SHIPPED
    order = OrderFactory(user=user if whose == "own" else other_user, status=status)
    pk = order.pk if whose != "missing" else 987654
    body = assert_problem(api_client.post(order_url(pk, action)), 403, "permission-denied")
    assert body["detail"] == "Only staff or merchants may do this."
    order.refresh_from_db()
    assert order.status == status


def test_a_merchant_group_member_may_ship(api_client: APIClient, other_user: User) -> None:
    from django.contrib.auth.models import Group

    from accounts.permissions import MERCHANT_GROUP

    order = OrderFactory(status=OrderStatus.PAID)
    other_user.groups.add(Group.objects.create(name=MERCHANT_GROUP))
    merchant = APIClient()
    merchant.force_authenticate(user=other_user)
    assert merchant.post(order_url(order.pk, "ship")).json()["status"] == "SHIPPED"


def test_staff_get_the_same_404_for_a_missing_order(staff_client: APIClient) -> None:
    body = assert_problem(staff_client.post(order_url(987654, "ship")), 404, "not-found")
    assert body["detail"] == "No such order."


@pytest.mark.parametrize(
    ("status", "action"),
    [
        ("CREATED", "ship"),
        ("CREATED", "complete"),
        ("PAID", "complete"),
        ("SHIPPED", "cancel"),
        ("COMPLETED", "cancel"),
        ("CANCELLED", "ship"),
    ],
)
def test_illegal_moves_are_409(
    api_client: APIClient, staff_client: APIClient, user: User, status: str, action: str
) -> None:
    order = OrderFactory(user=user, status=status)
    client = api_client if action == "cancel" else staff_client
    body = assert_problem(client.post(order_url(order.pk, action)), 409, "illegal-transition")
    assert status in body["detail"]
    order.refresh_from_db()
    assert order.status == status


def test_anonymous_callers_are_refused(anon_client: APIClient) -> None:
    assert_problem(anon_client.get(ORDERS), 401, "not-authenticated")
    payload = {"request_id": "r", "amount": "1.00"}
    assert_problem(anon_client.post(ORDERS, payload, format="json"), 401, "not-authenticated")


def test_transitions_accept_only_post(api_client: APIClient, user: User) -> None:
    order = OrderFactory(user=user)
    assert_problem(api_client.get(order_url(order.pk, "cancel")), 405, "method-not-allowed")
    assert_problem(api_client.put(order_url(order.pk), {}), 405, "method-not-allowed")


BAD_ORDERS: list[tuple[str, Any]] = [
    ("empty", {}),
    ("missing amount", {"request_id": "r-1"}),
    ("missing request id", {"amount": "1.00"}),
    ("amount text", {"request_id": "r-1", "amount": "lots"}),
    ("amount negative", {"request_id": "r-1", "amount": "-1.00"}),
    ("amount zero", {"request_id": "r-1", "amount": 0}),
    ("amount three places", {"request_id": "r-1", "amount": "0.005"}),
    ("amount float three places", {"request_id": "r-1", "amount": 1.234}),
    ("amount too large", {"request_id": "r-1", "amount": "99999999999"}),
    ("amount big int", {"request_id": "r-1", "amount": 10**40}),
    ("amount exponent", {"request_id": "r-1", "amount": "1E+30"}),
    ("amount NaN", {"request_id": "r-1", "amount": "nan"}),
    ("amount -Infinity", {"request_id": "r-1", "amount": "-Infinity"}),
    ("amount null", {"request_id": "r-1", "amount": None}),
    ("amount list", {"request_id": "r-1", "amount": ["1.00"]}),
    ("request id empty", {"request_id": "", "amount": "1.00"}),
    ("request id blank", {"request_id": "   ", "amount": "1.00"}),
    ("request id too long", {"request_id": "r" * 65, "amount": "1.00"}),
    ("request id spaces", {"request_id": "my order", "amount": "1.00"}),
    ("request id unicode", {"request_id": "zamówienie", "amount": "1.00"}),
    ("request id nul", {"request_id": "r\x00", "amount": "1.00"}),
    ("request id null", {"request_id": None, "amount": "1.00"}),
    ("request id object", {"request_id": {"id": 1}, "amount": "1.00"}),
    ("body list", [{"request_id": "r-1", "amount": "1.00"}]),
    ("body number", 42),
]


@pytest.mark.parametrize(("case", "payload"), BAD_ORDERS, ids=[c for c, _ in BAD_ORDERS])
def test_bad_orders_are_400(api_client: APIClient, case: str, payload: Any) -> None:
    response = api_client.post(ORDERS, json.dumps(payload), content_type="application/json")
    assert_problem(response, 400, "validation-error")
    assert Order.objects.count() == 0


@pytest.mark.parametrize("content", [b"", b"{", b'{"request_id": "r-1", "amount": 1e99999}'])
def test_malformed_json_is_400(api_client: APIClient, content: bytes) -> None:
    response = api_client.post(ORDERS, content, content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/problem+json")
    assert Order.objects.count() == 0
