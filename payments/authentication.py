"""Authentication of the payment gateway's callbacks: an HMAC-SHA256 signature of the body.

The gateway signs the raw request body with the shared secret
``settings.PAYMENT_GATEWAY_SECRET`` and sends the hex digest in
``X-Gateway-Signature``. A callback is trusted only when the digest matches
(compared in constant time); it carries no user. An empty secret trusts nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import RequestDataTooBig
from django.utils.translation import gettext_lazy as _
from rest_framework import status
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import APIException, AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

SIGNATURE_HEADER = "X-Gateway-Signature"
#: ``request.auth`` of a request the gateway signed.
GATEWAY = "payment-gateway"

_HEX_DIGEST = re.compile(r"\A[0-9a-fA-F]{64}\Z")


class CallbackTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "callback_too_large"
    default_detail = _("The callback's body is larger than the server accepts.")


def gateway_signature(body: bytes, *, secret: str | None = None) -> str:
    """The hex HMAC-SHA256 of ``body`` with ``secret`` (default: the gateway secret)."""
    key = settings.PAYMENT_GATEWAY_SECRET if secret is None else secret
    return hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def gateway_signature_valid(body: bytes, signature: str) -> bool:
    """Whether ``signature`` is the gateway's signature of ``body``."""
    if not settings.PAYMENT_GATEWAY_SECRET or not _HEX_DIGEST.fullmatch(signature):
        return False
    return hmac.compare_digest(gateway_signature(body), signature.lower())


class GatewaySignatureAuthentication(BaseAuthentication):
    """DRF authentication of gateway callbacks by ``X-Gateway-Signature``.

    A missing or wrong signature fails authentication (``401``), a body above
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is ``413`` (it cannot be verified); a valid one
    authenticates the request as the gateway: ``request.user`` stays anonymous and
    ``request.auth`` is :data:`GATEWAY`.
    """

    def authenticate(self, request: Request) -> tuple[Any, str] | None:
        signature = request.headers.get(SIGNATURE_HEADER, "").strip()
        if not signature:
            raise AuthenticationFailed(
                _("The callback is not signed: send the body's HMAC-SHA256 in %(header)s.")
                % {"header": SIGNATURE_HEADER},
                code="gateway_signature_missing",
            )
        try:
            body = request.body
        except RequestDataTooBig as exc:  # DATA_UPLOAD_MAX_MEMORY_SIZE
            raise CallbackTooLarge() from exc
        if not gateway_signature_valid(body, signature):
            raise AuthenticationFailed(
                _("The callback's signature does not match its body."),
                code="gateway_signature_invalid",
            )
        return AnonymousUser(), GATEWAY

    def authenticate_header(self, request: Request) -> str:
        return f'HMAC-SHA256 header="{SIGNATURE_HEADER}"'


class IsPaymentGateway(BasePermission):
    """Lets through only requests :class:`GatewaySignatureAuthentication` authenticated."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return request.auth == GATEWAY
