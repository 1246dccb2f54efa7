"""Property tests: no body, however malformed, makes the write APIs answer 5xx."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from tests.support.strategies import json_values

ENDPOINTS = ["/api/orders/", "/api/accounts/me/deposit/"]

# Bodies shaped like the real ones, with every field drawn from anything at all.
field_values = (
    json_values
    | st.from_regex(r"\A[A-Za-z0-9_.:-]{0,70}\Z")
    | st.sampled_from(
        ["0.01", "9999999999.99", "10000000000.00", "1e3", "-0", "0.001", "NaN", "1_000"]
    )
)
shaped = st.fixed_dictionaries(
    {},
    optional={"request_id": field_values, "amount": field_values, "reference": field_values},
)


def encode(value: Any) -> bytes:
    # allow_nan: Python writes NaN/Infinity, which strict JSON parsers must refuse.
    return json.dumps(value, allow_nan=True).encode()


bodies = st.one_of(
    shaped.map(encode),
    json_values.map(encode),
    st.integers(min_value=1, max_value=6000).map(
        lambda d: b'{"amount": ' + b"[" * d + b"]" * d + b"}"
    ),
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
)

FUZZ = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ENDPOINTS)
@FUZZ
@given(
    body=bodies,
    content_type=st.sampled_from(
        [
            "application/json",
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=xyz",
        ]
    ),
    method=st.sampled_from(["post", "put", "patch", "delete"]),
)
def test_arbitrary_bodies_never_cause_a_server_error(
    api_client: APIClient, endpoint: str, body: bytes, content_type: str, method: str
) -> None:
    response = getattr(api_client, method)(endpoint, body, content_type=content_type)
    assert response.status_code < 500, (response.status_code, body, response.content)
    if response.status_code >= 400:
        assert response["Content-Type"].startswith("application/problem+json")


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ENDPOINTS)
@FUZZ
@given(payload=shaped)
def test_arbitrary_form_fields_never_cause_a_server_error(
    api_client: APIClient, endpoint: str, payload: dict[str, Any]
) -> None:
    form = {
        key: value if isinstance(value, str) else json.dumps(value, allow_nan=True)
        for key, value in payload.items()
    }
    response = api_client.post(endpoint, form)
    assert response.status_code < 500, (response.status_code, payload, response.content)
