"""The shop's server-rendered pages, through Django's test client (the real browser is
``tests/sample/test_checkout_browser.py``): session login, the orders, an order with the
balance and the ledger, the checkout's JSON endpoint and the classic order form."""

from __future__ import annotations

import re
import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import Account
from accounts.services import account_deposit, account_get_or_create_for_user
from orders.models import Order, OrderStatus
from tests.support.ledger import charges

pytestmark = pytest.mark.django_db

PASSWORD = "demo-password"


@pytest.fixture
def shopper(db: None) -> User:
    user = User.objects.create_user("alice", password=PASSWORD)
    account = account_get_or_create_for_user(user=user)
    account_deposit(account_id=account.pk, amount=Decimal("100.00"), reference="seed_alice")
    return user


@pytest.fixture
def customer(shopper: User) -> Client:
    client = Client()
    response = client.post("/shop/login/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/shop/"
    return client


def test_the_root_leads_to_the_shop(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/shop/"
    assert client.get("/", follow=True).redirect_chain[-1][0].startswith("/shop/login/")


def test_pages_need_a_login_and_errors_stay_html(client: Client, shopper: User) -> None:
    for path in ("/shop/", "/shop/checkout/", "/shop/checkout/form/", "/shop/orders/1/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/shop/login/")
    login = client.get("/shop/login/")
    assert login.status_code == 200 and b"demo-password" in login.content
    wrong = client.post("/shop/login/", {"username": "alice", "password": "nope"})
    assert b"Wrong username or password" in wrong.content


def test_an_order_of_someone_else_is_a_404_page(customer: Client) -> None:
    other = User.objects.create_user("mallory")
    order = Order.objects.create(user=other, request_id="x-1", amount=Decimal("5.00"))
    response = customer.get(f"/shop/orders/{order.pk}/")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/problem+json")


def test_the_checkout_endpoint_pays_once_per_key(customer: Client, shopper: User) -> None:
    page = customer.get("/shop/checkout/")
    assert page.status_code == 200 and b'id="pay"' in page.content
    csrf = customer.cookies["csrftoken"].value
    key = str(uuid.uuid4())

    def pay(amount: str = "25.00", **headers: str) -> Any:
        return customer.post(
            "/shop/checkout/pay/",
            {"amount": amount},
            content_type="application/json",
            headers={"X-CSRFToken": csrf, **headers},
        )

    first = pay(**{"Idempotency-Key": key})
    again = pay(**{"Idempotency-Key": key})
    assert first.status_code == again.status_code == 201
    assert again.content == first.content and again["Idempotent-Replayed"] == "true"
    body = first.json()
    assert body["status"] == OrderStatus.PAID and body["balance"] == "75.00"
    assert charges(shopper) == 1
    assert pay(amount="12.50", **{"Idempotency-Key": key}).status_code == 422
    assert pay().status_code == 400  # no key: refused, nothing charged
    too_much = pay(amount="500.00", **{"Idempotency-Key": str(uuid.uuid4())})
    assert too_much.status_code == 409 and too_much.json()["code"] == "insufficient-funds"
    assert charges(shopper) == 1
    assert Order.objects.filter(user=shopper).count() == 1  # the refused one rolled back
    order_page = customer.get(f"/shop/orders/{body['order_id']}/")
    assert b"75.00" in order_page.content and body["pay_no"].encode() in order_page.content


def _form_token(page: bytes) -> str:
    match = re.search(rb'name="submit_token" value="([^"]+)"', page)
    assert match is not None
    return match.group(1).decode()


def test_the_order_form_submitted_twice_makes_one_order(customer: Client, shopper: User) -> None:
    token = _form_token(customer.get("/shop/checkout/form/").content)
    first = customer.post("/shop/checkout/form/", {"submit_token": token, "amount": "40.00"})
    order = Order.objects.get(user=shopper)
    assert first.status_code == 302 and first["Location"] == f"/shop/orders/{order.pk}/"
    second = customer.post("/shop/checkout/form/", {"submit_token": token, "amount": "40.00"})
    assert second.status_code == 409
    assert second["Content-Type"].startswith("text/html")
    assert b"already placed" in second.content and f"#{order.pk}".encode() in second.content
    assert Order.objects.filter(user=shopper).count() == 1 and charges(shopper) == 1
    assert Account.objects.get(user=shopper).balance == Decimal("60.00")


def test_a_refused_form_spends_no_token_and_bad_tokens_get_a_page(
    customer: Client, shopper: User
) -> None:
    token = _form_token(customer.get("/shop/checkout/form/").content)
    account = Account.objects.get(user=shopper)
    Account.objects.filter(pk=account.pk).update(balance=Decimal("1.00"))
    refused = customer.post("/shop/checkout/form/", {"submit_token": token, "amount": "12.50"})
    assert refused.status_code == 409 and b"not placed" in refused.content
    Account.objects.filter(pk=account.pk).update(balance=Decimal("100.00"))
    # the refusal rolled back with the token: the same form can be sent again
    again = customer.post("/shop/checkout/form/", {"submit_token": token, "amount": "12.50"})
    assert again.status_code == 302
    bad = customer.post("/shop/checkout/form/", {"submit_token": "forged", "amount": "12.50"})
    assert bad.status_code == 400 and b"expired" in bad.content
    odd = customer.post("/shop/checkout/form/", {"submit_token": token, "amount": "7"})
    assert odd.status_code == 400
    assert Order.objects.filter(user=shopper).count() == 1
