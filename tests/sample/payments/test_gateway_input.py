"""What the payment gateway's callback refuses: a missing or wrong signature, malformed
notifications, any body at all (never a server error)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from orders.models import Order, OrderStatus
from payments.authentication import gateway_signature
from payments.models import GatewayPayment
from tests.support.factories import TokenFactory
from tests.support.gateway import CALLBACK, callback, notification, signed_post
from tests.support.problems import assert_problem
from tests.support.strategies import json_values


@pytest.mark.django_db
class TestSignature:
    @pytest.mark.parametrize(
        ("signature", "code"),
        [
            (None, "gateway-signature-missing"),
            ("", "gateway-signature-missing"),
            ("0" * 64, "gateway-signature-invalid"),
            ("not-hex", "gateway-signature-invalid"),
            ("é" * 64, "gateway-signature-invalid"),
            ("other-secret", "gateway-signature-invalid"),
            ("other-body", "gateway-signature-invalid"),
        ],
    )
    def test_a_missing_or_wrong_signature_is_401_and_changes_nothing(
        self, gateway: APIClient, order: Order, signature: str | None, code: str
    ) -> None:
        body = json.dumps(notification(order)).encode()
        if signature == "other-secret":
            signature = gateway_signature(body, secret="not-the-secret")
        elif signature == "other-body":
            signature = gateway_signature(body.replace(b"25.00", b"2.50"))
        response = signed_post(gateway, body, signature=signature)
        assert_problem(response, 401, code)
        assert "X-Gateway-Signature" in response["WWW-Authenticate"]
        order.refresh_from_db()
        assert order.status == OrderStatus.CREATED
        assert not GatewayPayment.objects.exists()

    def test_the_hex_digest_may_be_upper_case(self, gateway: APIClient, order: Order) -> None:
        body = json.dumps(notification(order)).encode()
        response = signed_post(gateway, body, signature=gateway_signature(body).upper())
        assert response.status_code == 200

    def test_an_empty_secret_trusts_nothing(
        self, gateway: APIClient, order: Order, settings: Any
    ) -> None:
        body = json.dumps(notification(order)).encode()
        settings.PAYMENT_GATEWAY_SECRET = ""
        response = signed_post(gateway, body, signature=gateway_signature(body, secret=""))
        assert_problem(response, 401, "gateway-signature-invalid")

    def test_the_secret_comes_from_the_settings(
        self, gateway: APIClient, order: Order, settings: Any
    ) -> None:
        settings.PAYMENT_GATEWAY_SECRET = "rotated"
        body = json.dumps(notification(order)).encode()
        old = signed_post(gateway, body, signature=gateway_signature(body, secret="old"))
        assert_problem(old, 401, "gateway-signature-invalid")
        new = signed_post(gateway, body, signature=gateway_signature(body, secret="rotated"))
        assert new.status_code == 200

    def test_a_user_token_is_no_signature(self, gateway: APIClient, order: Order) -> None:
        gateway.credentials(HTTP_AUTHORIZATION=f"Token {TokenFactory(user=order.user).key}")
        response = gateway.post(CALLBACK, notification(order), format="json")
        assert_problem(response, 401, "gateway-signature-missing")


@pytest.mark.django_db
class TestInvalidInput:
    @pytest.mark.parametrize(
        ("changes", "fields"),
        [
            ({"trade_no": None}, {"trade_no"}),
            ({"trade_no": ""}, {"trade_no"}),
            ({"trade_no": "has space"}, {"trade_no"}),
            ({"trade_no": "x" * 65}, {"trade_no"}),
            ({"order_id": 0}, {"order_id"}),
            ({"order_id": 2**63}, {"order_id"}),
            ({"order_id": "seven"}, {"order_id"}),
            ({"amount": "0.00"}, {"amount"}),
            ({"amount": "-25.00"}, {"amount"}),
            ({"amount": "25.001"}, {"amount"}),
            ({"amount": "NaN"}, {"amount"}),
            ({"amount": "1e30"}, {"amount"}),
            ({"status": "PAID"}, {"status"}),
            ({"status": ["SUCCESS"]}, {"status"}),
            ({"trade_no": True, "status": "success"}, {"trade_no", "status"}),
        ],
    )
    def test_bad_fields_are_400_with_field_errors(
        self, gateway: APIClient, order: Order, changes: dict[str, Any], fields: set[str]
    ) -> None:
        payload = {k: v for k, v in notification(order, **changes).items() if v is not None}
        body = assert_problem(callback(gateway, **payload), 400, "validation-error")
        assert set(body["errors"]) == fields
        assert not GatewayPayment.objects.exists()

    @pytest.mark.parametrize(
        ("body", "content_type", "status", "code"),
        [
            (b"{", "application/json", 400, "parse-error"),
            (b"\xff\xfe", "application/json", 400, "parse-error"),
            (b"[1, 2]", "application/json", 400, "validation-error"),
            (b'"SUCCESS"', "application/json", 400, "validation-error"),
            (b"", "application/json", 400, "validation-error"),
            (b"trade_no=T-1", "application/x-www-form-urlencoded", 415, "unsupported-media-type"),
        ],
    )
    def test_unreadable_bodies_are_4xx_problems(
        self, gateway: APIClient, body: bytes, content_type: str, status: int, code: str
    ) -> None:
        response = signed_post(gateway, body, content_type=content_type)
        assert_problem(response, status, code)

    def test_a_body_too_large_to_verify_is_413(
        self, gateway: APIClient, order: Order, settings: Any
    ) -> None:
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
        body = json.dumps(notification(order, trade_no="T" * 64)).encode()
        assert len(body) > 100
        assert_problem(signed_post(gateway, body), 413, "callback-too-large")
        assert not GatewayPayment.objects.exists()

    def test_other_methods_are_refused(self, gateway: APIClient) -> None:
        response = gateway.get(CALLBACK, HTTP_X_GATEWAY_SIGNATURE=gateway_signature(b""))
        assert_problem(response, 405, "method-not-allowed")


ORDER = "<the order>"
fields = {
    "trade_no": json_values | st.from_regex(r"\A[A-Za-z0-9_.:-]{0,70}\Z"),
    "order_id": json_values | st.just(ORDER),
    "amount": json_values | st.sampled_from(["25.00", "25", "25.0", "0.01", "1e400", "-0"]),
    "status": json_values | st.sampled_from(["SUCCESS", "FAILED", "success"]),
}
shaped = st.fixed_dictionaries({}, optional=fields)
bodies = st.one_of(
    shaped.map(lambda payload: json.dumps(payload, allow_nan=True).encode()),
    json_values.map(lambda value: json.dumps(value, allow_nan=True).encode()),
    st.binary(max_size=200),
)


@pytest.mark.django_db
@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=bodies, signed=st.booleans())
def test_arbitrary_bodies_never_cause_a_server_error(
    gateway: APIClient, order: Order, body: bytes, signed: bool
) -> None:
    body = body.replace(json.dumps(ORDER).encode(), str(order.pk).encode())
    response = signed_post(gateway, body, signature="sign" if signed else "0" * 64)
    assert response.status_code < 500, (response.status_code, body, response.content)
    if response.status_code >= 400:
        assert response["Content-Type"].startswith("application/problem+json")
    if not signed:
        assert response.status_code == 401
