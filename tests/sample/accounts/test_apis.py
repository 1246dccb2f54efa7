"""HTTP API of the accounts app."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.services import account_deposit
from tests.support.factories import AccountFactory
from tests.support.problems import assert_problem

ME = "/api/accounts/me/"
DEPOSIT = "/api/accounts/me/deposit/"


@pytest.mark.django_db
def test_anonymous_callers_are_refused(anon_client: APIClient) -> None:
    assert_problem(anon_client.get(ME), 401, "not-authenticated")
    assert_problem(anon_client.post(DEPOSIT, {"amount": "1.00"}), 401, "not-authenticated")
    assert Account.objects.count() == 0


def test_me_opens_an_empty_account(api_client: APIClient, user: User) -> None:
    response = api_client.get(ME)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"id", "username", "balance", "version", "updated_at"}
    assert body["username"] == "alice"
    assert (body["balance"], body["version"]) == ("0.00", 0)
    assert api_client.get(ME).json() == body
    assert Account.objects.filter(user=user).count() == 1


def test_me_shows_the_balance_and_version(api_client: APIClient, user: User) -> None:
    account = AccountFactory(user=user)
    account_deposit(account_id=account.pk, amount=Decimal("100"))
    body = api_client.get(ME).json()
    assert (body["id"], body["balance"], body["version"]) == (account.pk, "100.00", 1)


def test_deposit_answers_with_the_ledger_entry(api_client: APIClient) -> None:
    response = api_client.post(DEPOSIT, {"amount": "25.5", "reference": "dep-1"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"reference", "amount", "balance_after", "kind", "created_at"}
    assert (body["reference"], body["amount"], body["balance_after"], body["kind"]) == (
        "dep-1",
        "25.50",
        "25.50",
        "deposit",
    )
    me = api_client.get(ME).json()
    assert (me["balance"], me["version"]) == ("25.50", 1)


def test_deposit_without_reference_is_a_new_deposit_each_time(api_client: APIClient) -> None:
    first = api_client.post(DEPOSIT, {"amount": "1.00"}, format="json")
    second = api_client.post(DEPOSIT, {"amount": "1.00"}, format="json")
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json()["reference"] != second.json()["reference"]
    assert api_client.get(ME).json()["balance"] == "2.00"


def test_repeated_deposit_answers_identically_and_deposits_once(api_client: APIClient) -> None:
    payload = {"amount": "10.00", "reference": "dep-1"}
    first = api_client.post(DEPOSIT, payload, format="json")
    again = api_client.post(DEPOSIT, payload, format="json")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.content == first.content
    assert api_client.get(ME).json()["balance"] == "10.00"
    assert LedgerEntry.objects.count() == 1


def test_reference_reused_with_another_amount_is_a_conflict(api_client: APIClient) -> None:
    api_client.post(DEPOSIT, {"amount": "10.00", "reference": "dep-1"}, format="json")
    response = api_client.post(DEPOSIT, {"amount": "11.00", "reference": "dep-1"}, format="json")
    assert_problem(response, 409, "ledger-reference-conflict")
    assert api_client.get(ME).json()["balance"] == "10.00"


def test_payment_references_are_reserved(api_client: APIClient) -> None:
    response = api_client.post(DEPOSIT, {"amount": "1.00", "reference": "pay_x"}, format="json")
    body = assert_problem(response, 400, "validation-error")
    assert "reference" in body["errors"]


def test_deposit_beyond_the_largest_balance_is_a_conflict(api_client: APIClient) -> None:
    top = {"amount": "9999999999.99"}
    assert api_client.post(DEPOSIT, top, format="json").status_code == 201
    response = api_client.post(DEPOSIT, {"amount": "0.01"}, format="json")
    assert_problem(response, 409, "balance-limit-exceeded")


BAD_DEPOSITS: list[tuple[str, Any]] = [
    ("missing amount", {}),
    ("amount null", {"amount": None}),
    ("amount text", {"amount": "ten"}),
    ("amount zero", {"amount": "0"}),
    ("amount negative", {"amount": "-5.00"}),
    ("amount three places", {"amount": "1.001"}),
    ("amount too large", {"amount": "10000000000.00"}),
    ("amount huge exponent", {"amount": "1e999999"}),
    ("amount NaN", {"amount": "NaN"}),
    ("amount Infinity", {"amount": "Infinity"}),
    ("amount bool", {"amount": True}),
    ("amount list", {"amount": [1]}),
    ("amount object", {"amount": {"value": 1}}),
    ("reference empty", {"amount": "1.00", "reference": ""}),
    ("reference too long", {"amount": "1.00", "reference": "r" * 65}),
    ("reference bad chars", {"amount": "1.00", "reference": "a b/c"}),
    ("reference nul", {"amount": "1.00", "reference": "a\x00b"}),
    ("reference object", {"amount": "1.00", "reference": {"a": 1}}),
    ("body list", [1, 2]),
    ("body string", "amount"),
    ("body null", None),
]


@pytest.mark.parametrize(("case", "payload"), BAD_DEPOSITS, ids=[c for c, _ in BAD_DEPOSITS])
def test_bad_deposits_are_400(api_client: APIClient, case: str, payload: Any) -> None:
    response = api_client.post(DEPOSIT, json.dumps(payload), content_type="application/json")
    assert_problem(response, 400, "validation-error")
    assert LedgerEntry.objects.count() == 0


@pytest.mark.parametrize(
    ("content", "content_type", "status", "code"),
    [
        (b'{"amount": ', "application/json", 400, "parse-error"),
        (b"\xff\xfe\x00", "application/json", 400, "parse-error"),
        (b'{"amount": NaN}', "application/json", 400, "parse-error"),
        (b"amount=1.00", "text/plain", 415, "unsupported-media-type"),
    ],
)
def test_unparseable_bodies_are_4xx(
    api_client: APIClient, content: bytes, content_type: str, status: int, code: str
) -> None:
    response = api_client.post(DEPOSIT, content, content_type=content_type)
    assert_problem(response, status, code)


def test_form_encoded_deposit_works(api_client: APIClient) -> None:
    response = api_client.post(DEPOSIT, {"amount": "3.00", "reference": "form"})
    assert response.status_code == 201
    assert response.json()["amount"] == "3.00"


def test_only_get_on_me(api_client: APIClient) -> None:
    assert_problem(api_client.post(ME, {}), 405, "method-not-allowed")
