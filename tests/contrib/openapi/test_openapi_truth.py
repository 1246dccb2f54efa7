"""The OpenAPI schema tells the truth (issue 20, item 9): the key's pattern is exactly
what the server accepts, and the sample's schema describes what its views answer
(schemathesis itself runs in CI: ``python3 dev.py schemathesis``)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from drf_spectacular.generators import SchemaGenerator
from hypothesis import given
from hypothesis import strategies as st

from idempotency.contrib.openapi.spectacular import KEY_PATTERNS
from idempotency.exceptions import KeyInvalid
from idempotency.http.requests import parse_key


def accepted(raw: str, *, strict: bool) -> bool:
    try:
        parse_key(raw, strict=strict)
    except KeyInvalid:
        return False
    return True


KEYISH = st.text(alphabet=st.characters(min_codepoint=0x1F, max_codepoint=0x7F), max_size=300)


@pytest.mark.parametrize("syntax", ["lenient", "strict"])
@given(raw=KEYISH | st.sampled_from(['"a;b"', "a;b", '"a\\\\"', "a b", '"x"', "x" * 255]))
def test_the_key_pattern_is_exactly_what_the_server_accepts(syntax: str, raw: str) -> None:
    raw = raw.strip(" \t")  # servers strip a header's surrounding whitespace
    if not raw:
        return
    strict = syntax == "strict"
    if strict and ";" in raw.rpartition('"')[2]:
        return  # strict mode also accepts RFC 8941 parameters, which the schema leaves out
    assert bool(re.fullmatch(KEY_PATTERNS[syntax], raw)) is accepted(raw, strict=strict), raw


def sample_schema() -> dict[str, Any]:
    document: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return document


def test_the_ledger_is_described_as_a_list() -> None:
    ledger = sample_schema()["paths"]["/api/accounts/me/ledger/"]["get"]
    body = ledger["responses"]["200"]["content"]["application/json"]["schema"]
    assert body["type"] == "array"


def test_every_answer_of_the_sample_is_documented() -> None:
    paths = sample_schema()["paths"]
    for route, item in paths.items():
        for method, operation in item.items():
            responses = operation["responses"]
            if "{" in route:
                assert "404" in responses, (route, method)
            if method == "post" and "requestBody" in operation:
                assert "400" in responses, (route, method)
            if operation.get("security") != [{}] and route != "/api/auth/token/":
                assert {"401", "403"} <= set(responses), (route, method)


def test_an_amount_is_documented_as_positive() -> None:
    deposit = sample_schema()["components"]["schemas"]["AccountDepositInput"]
    pattern = deposit["properties"]["amount"]["pattern"]
    assert re.fullmatch(pattern, "0.01") and re.fullmatch(pattern, "25")
    assert not re.fullmatch(pattern, "0") and not re.fullmatch(pattern, "0.00")


def test_submit_token_purposes_are_the_offered_ones() -> None:
    operation = sample_schema()["paths"]["/api/idempotency/tokens/"]["post"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    component = sample_schema()["components"]["schemas"][ref.rsplit("/", 1)[1]]
    purpose = component["properties"]["purpose"]
    assert purpose.get("enum") or "$ref" in str(purpose)


@pytest.mark.django_db
def test_an_undeclared_method_on_a_submit_token_view_is_405_and_spends_nothing(
    client: Client,
) -> None:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username="tracer", password="pw")
    client.force_login(user)
    response = client.generic("TRACE", "/api/orders/checkout/", HTTP_X_SUBMIT_TOKEN="nope")
    assert response.status_code == 405


@pytest.mark.django_db
def test_an_identifier_sent_as_a_number_is_refused_as_the_schema_says(client: Client) -> None:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username="numbers", password="pw")
    client.force_login(user)
    refused = client.post(
        "/api/orders/", {"request_id": 0, "amount": "25.00"}, content_type="application/json"
    )
    assert refused.status_code == 400
    assert "request_id" in refused.json()["errors"]
    accepted = client.post(
        "/api/orders/", {"request_id": "0", "amount": "25.00"}, content_type="application/json"
    )
    assert accepted.status_code == 201
