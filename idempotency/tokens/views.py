"""Submit tokens in views: :func:`require_submit_token`, :class:`SubmitTokenPermission`
and :class:`SubmitTokenIssueView`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponseBase
from rest_framework import serializers, status
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency.conf import idempotency_settings
from idempotency.contrib.drf.exceptions import APIError
from idempotency.exceptions import (
    IdempotencyError,
    ImproperlyApplied,
    StoreUnavailable,
    SubmitTokenInvalid,
    SubmitTokenUsed,
)
from idempotency.http.view_marks import split_view_args
from idempotency.tokens.api import consume_submit_token, issue_token
from idempotency.tokens.base import MAX_PURPOSE_LENGTH, check_purpose, token_scope

F = TypeVar("F", bound=Callable[..., Any])


def _header_token(request: HttpRequest | Request) -> str | None:
    value = request.headers.get(idempotency_settings.SUBMIT_TOKEN_HEADER)
    value = (value or "").strip()
    return value or None


def _missing() -> SubmitTokenInvalid:
    return SubmitTokenInvalid(
        f"This action needs a one-time submit token in the "
        f"{idempotency_settings.SUBMIT_TOKEN_HEADER} header."
    )


def _user_scope(request: HttpRequest | Request) -> str | None:
    return token_scope(getattr(request, "user", None))


def _request_of(args: tuple[Any, ...]) -> HttpRequest | Request:
    return split_view_args(args, decorator="@require_submit_token")[1]


def require_submit_token(
    purpose: str, *, scope: Callable[[Any], str | None] | None = None
) -> Callable[[F], F]:
    """Let an unsafe request (POST, PUT, PATCH, DELETE) through only with a fresh token.

    Reads the ``SUBMIT_TOKEN_HEADER`` header and consumes the token for ``purpose``,
    bound to the request's user (or to ``scope(request)``). A missing, invalid or
    foreign token is answered 400, a used one 409, both as problem+json; safe methods
    pass untouched. Put it on function views (below ``@login_required``), on DRF
    ``APIView`` methods, or below ``@api_view``, so it runs after authentication.
    """
    check_purpose(purpose)
    get_scope = scope or _user_scope

    def check(request: HttpRequest | Request) -> HttpResponseBase | None:
        if request.method in SAFE_METHODS:
            return None
        token = _header_token(request)
        if token is None:
            return _missing().as_response()
        try:
            consume_submit_token(token=token, user_or_scope=get_scope(request), purpose=purpose)
        except (SubmitTokenInvalid, SubmitTokenUsed, StoreUnavailable) as exc:
            return exc.as_response()
        return None

    def decorate(view: F) -> F:
        if isinstance(view, type):
            raise ImproperlyApplied(
                "@require_submit_token decorates view functions and methods; for a DRF view "
                "class use permission_classes = [..., SubmitTokenPermission]."
            )
        if getattr(view, "cls", None) is not None or getattr(view, "view_class", None):
            raise ImproperlyApplied(
                "@require_submit_token was applied to the result of as_view() or @api_view: "
                "it would run before authentication. Put it below @api_view."
            )
        if iscoroutinefunction(view):

            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                refused = await sync_to_async(check)(_request_of(args))
                if refused is not None:
                    return refused
                return await view(*args, **kwargs)

            wrapped: Any = functools.wraps(view)(async_wrapper)
            markcoroutinefunction(wrapped)
        else:

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                refused = check(_request_of(args))
                if refused is not None:
                    return refused
                return view(*args, **kwargs)

            wrapped = functools.wraps(view)(wrapper)
        wrapped.submit_token_purpose = purpose
        return cast(F, wrapped)  # F's own signature, sync or async: no TypeVar narrows to F

    return decorate


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
        token = _header_token(request)
        if token is None:
            raise APIError(_missing())
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
    :class:`~idempotency.http.mixins.IdempotentMixin` keeps their status only.
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
