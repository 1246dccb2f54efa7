"""OpenAPI schema of the sample project (drf-spectacular).

The sample's views follow one convention: a nested ``InputSerializer`` for the
request body and an ``OutputSerializer`` for the answer. This schema class reads
that convention, so no view carries a schema annotation, and the library's
``idempotency.contrib.openapi.spectacular.AutoSchema`` underneath adds the Idempotency-Key contract.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.plumbing import ComponentRegistry
from drf_spectacular.types import OpenApiTypes
from rest_framework.permissions import AllowAny

from accounts.money import MAX_AMOUNT, MIN_AMOUNT
from idempotency.contrib.openapi.spectacular import AutoSchema, add_problem
from payments.authentication import SIGNATURE_HEADER


class SampleAutoSchema(AutoSchema):
    """Request and response bodies from the views' ``InputSerializer``/``OutputSerializer``."""

    def get_request_serializer(self) -> Any:
        if self.method not in ("POST", "PUT", "PATCH"):
            return None
        getter = getattr(self.view, "get_input_serializer_class", None)
        if callable(getter):
            return getter()
        serializer = getattr(self.view, "InputSerializer", None)
        if serializer is None and hasattr(self.view, "get_serializer"):  # DRF's token view
            return super().get_request_serializer()
        return serializer

    def get_response_serializers(self) -> Any:
        output = getattr(self.view, "OutputSerializer", None)
        if output is None:
            return OpenApiTypes.OBJECT
        if self.method == "GET" and getattr(self.view, "output_many", False):
            return output(many=True)
        if self.method == "GET" and type(self.view).__name__.endswith(("ListApi", "ListCreateApi")):
            return output(many=True)
        return output

    def get_operation(
        self,
        path: str,
        path_regex: str,
        path_prefix: str,
        method: str,
        registry: ComponentRegistry,
    ) -> dict[str, Any] | None:
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is not None:
            self._document_answers(operation, path, method, registry)
        return operation

    def _document_answers(
        self, operation: dict[str, Any], path: str, method: str, registry: ComponentRegistry
    ) -> None:
        """Every answer the sample's own layers give (its exception handler renders each
        as problem+json): validation, authentication, permissions, unknown objects."""
        if method in ("POST", "PUT", "PATCH") and self.get_request_serializer() is not None:
            add_problem(operation, 400, "The request is invalid (validation-error).", registry)
        permissions = getattr(self.view, "permission_classes", ())
        if any(not issubclass(p, AllowAny) for p in permissions if isinstance(p, type)):
            add_problem(
                operation,
                401,
                "No valid credentials were sent (not-authenticated, authentication-failed, "
                "or for the gateway, gateway-signature-*).",
                registry,
            )
            add_problem(operation, 403, "The caller may not do this (permission-denied).", registry)
        if "{" in path:
            add_problem(operation, 404, "No such object for this caller (not-found).", registry)

    def _is_create_operation(self) -> bool:
        """The sample's POSTs answer 201, but for status moves, the gateway's callback and
        the token view."""
        from rest_framework.authtoken.views import ObtainAuthToken

        from orders.apis import OrderCancelApi, OrderFulfilmentApi
        from payments.apis import GatewayCallbackApi

        if self.method != "POST":
            return False
        answers_200 = OrderCancelApi | OrderFulfilmentApi | GatewayCallbackApi | ObtainAuthToken
        return not isinstance(self.view, answers_200)

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


class AmountFieldSchema(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]
    """Money: a JSON string of ASCII digits with at most two decimals, never a number."""

    target_class = "accounts.serializer_fields.AmountField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return {
            "type": "string",
            "format": "decimal",
            "pattern": "^(?=[0-9.]*[1-9])[0-9]{1,10}(\\.[0-9]{1,2})?$",
            "example": "25.00",
            "description": f"An amount from {MIN_AMOUNT} to {MAX_AMOUNT}, as a string.",
        }
