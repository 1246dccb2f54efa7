"""One-time submit tokens on the order form: a form is submitted once per token."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from idempotency import issue_submit_token
from orders.models import Order
from tests.support.factories import TokenFactory, UserFactory
from tests.support.problems import assert_problem
from tests.support.stores import tokens_using
from tests.support.storms import run_threads

TOKENS = "/api/idempotency/tokens/"
CHECKOUT = "/api/orders/checkout/"
PURPOSE = "order-form"

pytestmark = pytest.mark.django_db


def fetch_token(client: APIClient) -> str:
    response = client.post(TOKENS, {"purpose": PURPOSE}, format="json")
    assert response.status_code == 201, response.content
    return str(response.json()["token"])


def checkout(client: APIClient, token: str | None, amount: Any = "19.90") -> Any:
    extra = {} if token is None else {"HTTP_X_SUBMIT_TOKEN": token}
    return client.post(CHECKOUT, {"amount": amount}, format="json", **extra)


class TestIssuing:
    def test_an_authenticated_caller_gets_a_fresh_token_for_the_order_form(
        self, api_client: APIClient
    ) -> None:
        response = api_client.post(TOKENS, {"purpose": PURPOSE}, format="json")
        assert response.status_code == 201
        body = response.json()
        assert set(body) == {"token", "purpose", "expires_at"}
        assert body["purpose"] == PURPOSE
        assert len(body["token"]) >= 40
        assert response["Cache-Control"] == "no-store"
        assert fetch_token(api_client) != body["token"]

    def test_only_the_sample_forms_purposes_are_offered(self, api_client: APIClient) -> None:
        response = api_client.post(TOKENS, {"purpose": "transfer"}, format="json")
        body = assert_problem(response, 400, "validation-error")
        assert set(body["errors"]) == {"purpose"}

    def test_anonymous_callers_get_none(self, anon_client: APIClient) -> None:
        response = anon_client.post(TOKENS, {"purpose": PURPOSE}, format="json")
        assert_problem(response, 401, "not-authenticated")


class TestCheckout:
    def test_a_token_creates_one_order_and_a_second_submit_is_409(
        self, api_client: APIClient, user: User
    ) -> None:
        token = fetch_token(api_client)
        first = checkout(api_client, token)
        assert first.status_code == 201, first.content
        body = first.json()
        assert (body["amount"], body["status"]) == ("19.90", "CREATED")
        order = Order.objects.get()
        assert (order.pk, order.user_id) == (body["id"], user.pk)
        assert body["request_id"].startswith("form-")
        assert token not in body["request_id"]
        again = checkout(api_client, token)
        assert_problem(again, 409, "submit-token-used")
        assert Order.objects.count() == 1
        # a new token is a new form: a new order
        assert checkout(api_client, fetch_token(api_client)).status_code == 201
        assert Order.objects.count() == 2

    def test_no_token_is_400_and_creates_nothing(self, api_client: APIClient) -> None:
        assert_problem(checkout(api_client, None), 400, "submit-token-invalid")
        assert_problem(checkout(api_client, "   "), 400, "submit-token-invalid")
        assert not Order.objects.exists()

    def test_an_unknown_token_is_400(self, api_client: APIClient) -> None:
        assert_problem(checkout(api_client, "made-up"), 400, "submit-token-invalid")
        assert_problem(checkout(api_client, "x" * 300), 400, "submit-token-invalid")
        assert not Order.objects.exists()

    def test_someone_elses_token_is_refused_and_stays_usable_by_its_owner(
        self, api_client: APIClient, other_user: User
    ) -> None:
        thief = APIClient(raise_request_exception=False)
        thief.force_authenticate(user=other_user)
        token = fetch_token(api_client)
        assert_problem(checkout(thief, token), 400, "submit-token-invalid")
        assert not Order.objects.exists()
        assert checkout(api_client, token).status_code == 201

    def test_a_token_for_another_purpose_is_refused(
        self, api_client: APIClient, user: User
    ) -> None:
        token = issue_submit_token(user_or_scope=user, purpose="profile-form")
        assert_problem(checkout(api_client, token), 400, "submit-token-invalid")
        assert not Order.objects.exists()

    def test_an_expired_token_is_refused(self, api_client: APIClient, user: User) -> None:
        token = issue_submit_token(user_or_scope=user, purpose=PURPOSE, ttl=0.05)
        time.sleep(0.1)  # real time: the backend's clock, past its expiry
        assert_problem(checkout(api_client, token), 400, "submit-token-invalid")
        assert not Order.objects.exists()

    def test_an_anonymous_submit_is_401_and_leaves_the_token_alone(
        self, api_client: APIClient, anon_client: APIClient
    ) -> None:
        token = fetch_token(api_client)
        assert_problem(checkout(anon_client, token), 401, "not-authenticated")
        assert checkout(api_client, token).status_code == 201

    def test_invalid_input_spends_the_token(self, api_client: APIClient) -> None:
        # the token is consumed before the form is read (the library's contract):
        # the form is shown again with a new token
        token = fetch_token(api_client)
        body = assert_problem(checkout(api_client, token, amount="-1"), 400, "validation-error")
        assert set(body["errors"]) == {"amount"}
        assert_problem(checkout(api_client, token), 409, "submit-token-used")
        assert not Order.objects.exists()

    def test_reading_the_form_endpoint_consumes_nothing(self, api_client: APIClient) -> None:
        token = fetch_token(api_client)
        response = api_client.get(CHECKOUT, HTTP_X_SUBMIT_TOKEN=token)
        assert_problem(response, 405, "method-not-allowed")
        assert checkout(api_client, token).status_code == 201


# -- real concurrency (PostgreSQL) -------------------------------------------------------


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "backend",
    [pytest.param("database", id="database"), pytest.param("redis", marks=pytest.mark.redis)],
)
def test_twenty_concurrent_submits_of_one_form_create_one_order(
    backend: str, settings: Any
) -> None:
    settings.IDEMPOTENCY = {**settings.IDEMPOTENCY, **tokens_using(backend)}
    api_token = TokenFactory(user=UserFactory(username="carol"))

    def client() -> APIClient:
        c = APIClient(raise_request_exception=False)
        c.credentials(HTTP_AUTHORIZATION=f"Token {api_token.key}")
        return c

    form_token = fetch_token(client())
    responses = run_threads(20, lambda i: checkout(client(), form_token))
    statuses = sorted(getattr(r, "status_code", 0) for r in responses)
    assert statuses == [201] + [409] * 19, statuses
    for response in responses:
        if response.status_code == 409:
            assert_problem(response, 409, "submit-token-used")
    order = Order.objects.get()
    assert (order.user_id, order.amount) == (api_token.user_id, Decimal("19.90"))
