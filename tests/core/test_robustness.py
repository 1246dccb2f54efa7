"""Arbitrary keys, bodies and content types: a clear 4xx or a normal answer, never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.testapp.models import Wallet

pytestmark = pytest.mark.django_db

header_values = st.one_of(
    st.text(max_size=300),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=260),
    st.builds(lambda s: f'"{s}"', st.text(max_size=40)),
)
bodies = st.one_of(st.binary(max_size=300), st.text(max_size=200).map(str.encode))
content_types = st.sampled_from(
    [
        "application/json",
        "application/x-www-form-urlencoded",
        "text/plain",
        "application/octet-stream",
        "application/merge-patch+json",
        "multipart/form-data; boundary=xyz",
        "multipart/form-data",
        "",
    ]
)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    key=header_values,
    body=bodies,
    content_type=content_types,
    url=st.sampled_from(["/t/api/", "/t/function/", "/t/viewset/", "/t/lease-function/"]),
    method=st.sampled_from(["POST", "PUT", "PATCH", "DELETE"]),
)
def test_never_a_server_error(
    client_a: Client,
    wallet: Wallet,
    key: str,
    body: bytes,
    content_type: str,
    url: str,
    method: str,
) -> None:
    client_a.raise_request_exception = False
    try:
        response: Any = client_a.generic(
            method, url, data=body, content_type=content_type, HTTP_IDEMPOTENCY_KEY=key
        )
    except (ValueError, UnicodeError):
        return  # the test client itself cannot encode this header: no request was made
    assert response.status_code < 500, response.content
    if response.status_code == 400 and response["Content-Type"] == "application/problem+json":
        assert b"idempotency-key" in response.content or b"error" in response.content
