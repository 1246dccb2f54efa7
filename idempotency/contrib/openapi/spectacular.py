"""OpenAPI documentation of the contract, for drf-spectacular (``[openapi]`` extra).

Point DRF at the schema class and every protected operation documents itself, with
no annotation on any view::

    REST_FRAMEWORK = {
        "DEFAULT_SCHEMA_CLASS": "idempotency.contrib.openapi.spectacular.AutoSchema",
    }

A view is protected when a method carries ``@idempotent`` (also below
``@api_view``), when it uses :class:`~idempotency.contrib.drf.mixins.IdempotentMixin` (for the
actions it covers), or when :class:`~idempotency.http.middleware.IdempotencyMiddleware`
is installed and the view is not ``@idempotency_exempt``. Its operations get:

* the ``Idempotency-Key`` header parameter (required as the view's policy says),
  1 to 255 printable ASCII characters;
* the ``Idempotent-Replayed`` header on the success responses;
* every answer the layer itself can give, as ``application/problem+json``: 400 (key
  invalid or required), 403 (a key from an anonymous caller), 409 in progress (with
  ``Retry-After``), 410 (response not stored), 413, 422 (key mismatch) and 503 (store
  unavailable, not durable or misconfigured).

Views guarded by :class:`~idempotency.contrib.drf.tokens.SubmitTokenPermission` or
``@require_submit_token`` get the ``X-Submit-Token`` header and the 400/409
``submit-token-*`` problems. A project with its own ``AutoSchema`` mixes in
:class:`IdempotencySchemaMixin` instead.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from django.conf import settings
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.plumbing import ComponentRegistry, ResolvedComponent
from rest_framework.views import APIView
from rest_framework.viewsets import ViewSetMixin

from idempotency.conf import idempotency_settings
from idempotency.contrib.drf.mixins import IdempotentMixin
from idempotency.contrib.drf.tokens import SubmitTokenPermission
from idempotency.contrib.openapi import (
    KEY_PATTERNS,
    PROBLEM_SCHEMA,
    REPLAYED_HEADER,
    key_parameter,
    problem_answers,
)
from idempotency.exceptions import PROBLEM_CONTENT_TYPE
from idempotency.http.options import Policy
from idempotency.http.requests import UNSAFE_METHODS
from idempotency.http.views import functions_of, handler_policies

#: The middleware's dotted paths: the package's re-export (the README's) and its module.
MIDDLEWARE_PATHS = frozenset(
    {"idempotency.IdempotencyMiddleware", "idempotency.http.middleware.IdempotencyMiddleware"}
)
PROBLEM_COMPONENT = "IdempotencyProblem"


def _handler(view: APIView, method: str) -> Any:
    if isinstance(view, ViewSetMixin) and getattr(view, "action", None):
        return getattr(view, str(view.action), None)
    return getattr(view, method.lower(), None)


def idempotency_policy(view: APIView, method: str) -> Policy | None:
    """The policy under which ``view`` handles ``method``, or None if it is not protected."""
    if method.upper() not in UNSAFE_METHODS:
        return None
    handler = _handler(view, method)
    if handler is None:
        return None
    policy = next(handler_policies(handler), None)
    if policy is not None:
        return policy
    if isinstance(view, IdempotentMixin):
        request: Any = SimpleNamespace(method=method.upper())
        if view.is_idempotent_action(request):
            return view.get_idempotency_policy()
        return None
    if not MIDDLEWARE_PATHS.isdisjoint(getattr(settings, "MIDDLEWARE", ())):
        exempt = getattr(view, "idempotency_exempt", False) or any(
            getattr(func, "idempotency_exempt", False) for func in functions_of(handler)
        )
        return None if exempt else Policy()
    return None


def needs_submit_token(view: APIView, method: str) -> bool:
    """Whether ``view`` consumes a one-time submit token on ``method``."""
    if method.upper() not in UNSAFE_METHODS:
        return False
    if any(
        isinstance(cls, type) and issubclass(cls, SubmitTokenPermission)
        for cls in getattr(view, "permission_classes", ())
    ):
        return True
    handler = _handler(view, method)
    return handler is not None and any(
        getattr(func, "submit_token_purpose", None) for func in functions_of(handler)
    )


def problem_ref(registry: ComponentRegistry) -> dict[str, Any]:
    """A ``$ref`` to the problem-details schema, registered on first use."""
    # drf-spectacular declares no types on ResolvedComponent's constructor
    component = ResolvedComponent(  # type: ignore[no-untyped-call]
        name=PROBLEM_COMPONENT,
        type=ResolvedComponent.SCHEMA,
        schema=PROBLEM_SCHEMA,
        object=PROBLEM_COMPONENT,
    )
    registry.register_on_missing(component)
    return dict(component.ref)


def add_problem(
    operation: dict[str, Any],
    status: int,
    description: str,
    registry: ComponentRegistry,
    headers: dict[str, Any] | None = None,
) -> None:
    """Document a problem+json answer ``status`` of a drf-spectacular ``operation``
    (descriptions merge; the problem schema is registered in ``registry`` once)."""
    responses = operation.setdefault("responses", {})
    response = responses.setdefault(str(status), {"description": description})
    if response.get("description") and description not in response["description"]:
        response["description"] = f"{response['description']} {description}"
    response.setdefault("content", {})[PROBLEM_CONTENT_TYPE] = {"schema": problem_ref(registry)}
    if headers:
        response.setdefault("headers", {}).update(headers)


def _add_header(operation: dict[str, Any], parameter: dict[str, Any]) -> None:
    parameters = operation.setdefault("parameters", [])
    if not any(p.get("in") == "header" and p.get("name") == parameter["name"] for p in parameters):
        parameters.append(parameter)


def document_idempotency(
    operation: dict[str, Any], policy: Policy, registry: ComponentRegistry
) -> None:
    """Add the ``Idempotency-Key`` contract to one operation."""
    _add_header(operation, key_parameter(policy))
    for status, response in operation.get("responses", {}).items():
        if str(status).startswith("2"):
            response.setdefault("headers", {}).update(REPLAYED_HEADER)
    for status, description, headers in problem_answers(policy):
        add_problem(operation, status, description, registry, headers=headers)


def document_submit_token(operation: dict[str, Any], registry: ComponentRegistry) -> None:
    """Add the one-time submit token contract to one operation."""
    header = str(idempotency_settings.SUBMIT_TOKEN_HEADER)
    _add_header(
        operation,
        {
            "in": "header",
            "name": header,
            "required": True,
            "description": "A one-time submit token issued for this form; spent by this request.",
            "schema": {"type": "string", "minLength": 1},
        },
    )
    add_problem(
        operation,
        400,
        "The submit token is missing, expired or foreign (submit-token-invalid).",
        registry,
    )
    add_problem(operation, 409, "The submit token was already used (submit-token-used).", registry)


if TYPE_CHECKING:
    #: What the mixin is mixed into, for the type checker: ``super()`` is an ``AutoSchema``.
    _MixedInto = SpectacularAutoSchema
else:
    _MixedInto = object


class IdempotencySchemaMixin(_MixedInto):
    """Mix into an ``AutoSchema`` (drf-spectacular) to document protected operations."""

    def get_operation(
        self,
        path: str,
        path_regex: str,
        path_prefix: str,
        method: str,
        registry: ComponentRegistry,
    ) -> dict[str, Any] | None:
        operation: dict[str, Any] | None = super().get_operation(
            path, path_regex, path_prefix, method, registry
        )
        if operation is None:
            return None
        policy = idempotency_policy(self.view, method)
        if policy is not None:
            document_idempotency(operation, policy, registry)
        if needs_submit_token(self.view, method):
            document_submit_token(operation, registry)
        return operation


class AutoSchema(IdempotencySchemaMixin, SpectacularAutoSchema):
    """drf-spectacular's ``AutoSchema`` that documents the idempotency contract."""


__all__ = [
    "KEY_PATTERNS",
    "AutoSchema",
    "IdempotencySchemaMixin",
    "add_problem",
    "document_idempotency",
    "document_submit_token",
    "idempotency_policy",
    "needs_submit_token",
]
