"""The sample's payment gateway, as the callback tests play it: signed notifications."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django.test import Client
from rest_framework.test import APIClient

from orders.models import Order
from payments.authentication import gateway_signature

CALLBACK = "/api/payments/callback/"


def signed_post(
    client: APIClient | Client,
    body: bytes,
    *,
    signature: str | None = "sign",
    content_type: str = "application/json",
) -> Any:
    """POST ``body`` as the gateway does: signed with the shared secret (``"sign"``)."""
    extra: dict[str, str] = {}
    if signature == "sign":
        signature = gateway_signature(body)
    if signature is not None:
        extra["HTTP_X_GATEWAY_SIGNATURE"] = signature
    return client.post(CALLBACK, body, content_type=content_type, **extra)


def callback(client: APIClient | Client, **payload: Any) -> Any:
    """Send one notification; ``amount`` may be given as a Decimal."""
    payload = {k: str(v) if isinstance(v, Decimal) else v for k, v in payload.items()}
    return signed_post(client, json.dumps(payload).encode())


def notification(order: Order, trade_no: str = "T-1", **changes: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "trade_no": trade_no,
        "order_id": order.pk,
        "amount": str(order.amount),
        "status": "SUCCESS",
    }
    payload.update(changes)
    return payload
