"""OpenAPI schema of the sample project (drf-spectacular).

The sample's views follow one convention: a nested ``InputSerializer`` for the
request body and an ``OutputSerializer`` for the answer. This schema class reads
that convention, so no view carries a schema annotation, and the library's
``idempotency.openapi.AutoSchema`` underneath adds the Idempotency-Key contract.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes

from idempotency.openapi import AutoSchema
from payments.authentication import SIGNATURE_HEADER


class SampleAutoSchema(AutoSchema):
    """Request and response bodies from the views' ``InputSerializer``/``OutputSerializer``."""

    def get_request_serializer(self) -> Any:
        if self.method in ("POST", "PUT", "PATCH"):
            return getattr(self.view, "InputSerializer", None)
        return None

    def get_response_serializers(self) -> Any:
        output = getattr(self.view, "OutputSerializer", None)
        if output is None:
            return OpenApiTypes.OBJECT
        if self.method == "GET" and type(self.view).__name__.endswith(("ListApi", "ListCreateApi")):
            return output(many=True)
        return output

    def _is_create_operation(self) -> bool:
        """The sample's POSTs answer 201, but for status moves and the gateway's callback."""
        from orders.apis import OrderCancelApi, OrderFulfilmentApi
        from payments.apis import GatewayCallbackApi

        if self.method != "POST":
            return False
        return not isinstance(self.view, OrderCancelApi | OrderFulfilmentApi | GatewayCallbackApi)

    def get_serializer_name(self, serializer: Any, direction: Any) -> str:
        """``AccountDepositApi.InputSerializer`` is named ``AccountDepositInput``."""
        outer, _, inner = type(serializer).__qualname__.rpartition(".")
        if outer:
            return outer.removesuffix("Api").removesuffix("View") + inner.removesuffix("Serializer")
        return str(super().get_serializer_name(serializer, direction))


class GatewaySignatureScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """The payment gateway's HMAC-SHA256 signature of the body."""

    target_class = "payments.authentication.GatewaySignatureAuthentication"
    name = "gatewaySignature"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": SIGNATURE_HEADER,
            "description": "Hex HMAC-SHA256 of the raw body, keyed with the shared secret.",
        }
