"""Submit tokens in DRF views: :class:`SubmitTokenPermission` and
:class:`SubmitTokenIssueView` (function views: :func:`idempotency.tokens.require_submit_token`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework import serializers, status
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency.contrib.drf.exceptions import APIError
from idempotency.exceptions import IdempotencyError, ImproperlyApplied
from idempotency.tokens.base import (
    MAX_PURPOSE_LENGTH,
    check_purpose,
    consume_submit_token,
    issue_token,
)
from idempotency.tokens.views import header_token, missing_token


class SubmitTokenPermission(BasePermission):
    """DRF permission: unsafe requests must carry a fresh submit token.

    The view names the token's purpose with ``submit_token_purpose = "checkout"``
    (or a ``get_submit_token_purpose()`` method, e.g. per viewset action). List it
    **last** in ``permission_classes``: DRF checks permissions in order, after
    authentication, so the token is only consumed once the caller is known and
    allowed. An anonymous caller is refused (401/403) without touching the token.
    It raises :class:`~idempotency.exceptions.SubmitTokenUsed` (409) and
    :class:`~idempotency.exceptions.SubmitTokenInvalid` (400) as
    :class:`~idempotency.contrib.drf.exceptions.APIError`, which DRF's exception
    handler renders. Throttles run after permissions: a throttled request has
    already spent its token.
    """

    def purpose_for(self, view: APIView) -> str:
        getter = getattr(view, "get_submit_token_purpose", None)
        purpose = getter() if callable(getter) else getattr(view, "submit_token_purpose", None)
        if not purpose:
            raise ImproperlyApplied(
                f"{type(view).__name__} uses SubmitTokenPermission but names no "
                "submit_token_purpose."
            )
        return check_purpose(purpose)

    def has_permission(self, request: Request, view: APIView) -> bool:
        # the method of the HTTP request itself: the browsable API checks permissions on
        # POST clones of a GET request to decide which forms to show, consuming nothing
        method = getattr(getattr(request, "_request", None), "method", None) or request.method
        if method in SAFE_METHODS or request.method in SAFE_METHODS:
            return True
        if str(request.method).lower() not in getattr(view, "http_method_names", ()) or not (
            hasattr(view, str(request.method).lower())
        ):
            return True  # a method the view does not have: DRF answers 405, no token spent
        purpose = self.purpose_for(view)
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return False
        token = header_token(request)
        if token is None:
            raise APIError(missing_token())
        try:
            consume_submit_token(token=token, user_or_scope=user, purpose=purpose)
        except IdempotencyError as exc:
            raise APIError(exc) from exc  # what any DRF exception handler renders
        return True


class SubmitTokenIssueView(APIView):
    """``POST {"purpose": "checkout"}`` → 201 ``{"token", "purpose", "expires_at"}``.

    Route it in the project, e.g. ``path("api/idempotency/tokens/",
    SubmitTokenIssueView.as_view())``. Authenticated callers only; the token is bound
    to the caller. Subclass to restrict ``allowed_purposes`` or set ``token_ttl``.

    Its answers are never stored in clear: :class:`~idempotency.IdempotencyMiddleware`
    leaves it alone (issuing again is harmless: each request gets a fresh token), and
    they say ``Cache-Control: no-store``, so a view that mixes in
    :class:`~idempotency.contrib.drf.mixins.IdempotentMixin` keeps their status only.
    """

    #: Never under IdempotencyMiddleware: a raw token must not be stored.
    idempotency_exempt = True
    permission_classes = [IsAuthenticated]
    #: Purposes a client may ask for (None: any).
    allowed_purposes: ClassVar[frozenset[str] | None] = None
    #: Seconds the issued tokens live (None: ``SUBMIT_TOKEN_TTL``).
    token_ttl: ClassVar[float | None] = None

    class InputSerializer(serializers.Serializer[Any]):
        purpose = serializers.CharField(max_length=MAX_PURPOSE_LENGTH)

    def get_input_serializer_class(self) -> type[serializers.Serializer[Any]]:
        """The request body: any purpose, or (``allowed_purposes``) one of those, which
        is also what the OpenAPI schema then says."""
        allowed = self.allowed_purposes
        if allowed is None:
            return self.InputSerializer
        return type(
            "InputSerializer",
            (serializers.Serializer,),
            {
                "purpose": serializers.ChoiceField(choices=sorted(allowed)),
                "__qualname__": f"{type(self).__name__}.OfferedInputSerializer",
            },
        )

    def post(self, request: Request) -> Response:
        serializer = self.get_input_serializer_class()(data=request.data)
        serializer.is_valid(raise_exception=True)
        purpose: str = serializer.validated_data["purpose"]
        issued = issue_token(user_or_scope=request.user, purpose=purpose, ttl=self.token_ttl)
        return Response(
            {
                "token": issued.token,
                "purpose": issued.purpose,
                "expires_at": issued.expires_at.isoformat(),
            },
            status=status.HTTP_201_CREATED,
            headers={"Cache-Control": "no-store"},
        )


__all__ = ["SubmitTokenIssueView", "SubmitTokenPermission"]
