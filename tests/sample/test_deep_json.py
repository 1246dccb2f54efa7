"""A JSON body nested 5,000 levels deep: a 4xx problem+json on every write endpoint of the
sample, with or without an Idempotency-Key, never a 500."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.support.factories import OrderFactory, funded_account

DEEP = b'{"amount": ' + b"[" * 5000 + b"]" * 5000 + b"}"

#: every unsafe endpoint of the sample; True where it reads the body (the rest ignore it)
ENDPOINTS = {
    "/api/auth/token/": True,
    "/api/idempotency/tokens/": True,
    "/api/accounts/me/deposit/": True,
    "/api/orders/": True,
    "/api/orders/checkout/": True,
    "/api/orders/{order}/pay/": True,
    "/api/payments/callback/": True,
    "/api/orders/{order}/cancel/": False,
    "/api/orders/{order}/ship/": False,
    "/api/orders/{order}/complete/": False,
}


@pytest.mark.django_db
@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_deep_json_is_a_client_error(user: Any, endpoint: str, keyed: bool) -> None:
    reads_body = ENDPOINTS[endpoint]
    funded_account("100.00", user=user)
    order = OrderFactory(user=user)
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(user=user)
    extra = {"HTTP_IDEMPOTENCY_KEY": str(uuid.uuid4())} if keyed else {}
    response = client.generic(
        "POST", endpoint.format(order=order.pk), DEEP, content_type="application/json", **extra
    )
    assert response.status_code < 500, (response.status_code, response.content[:300])
    if reads_body:
        assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    if response.status_code >= 400:
        assert response["Content-Type"].startswith("application/problem+json")
