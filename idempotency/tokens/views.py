"""Submit tokens in views: :func:`require_submit_token` (DRF's permission and issuing
view: :mod:`idempotency.contrib.drf.tokens`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpResponseBase

from idempotency.conf import idempotency_settings
from idempotency.exceptions import (
    ImproperlyApplied,
    StoreUnavailable,
    SubmitTokenInvalid,
    SubmitTokenUsed,
)
from idempotency.http.views import split_view_args
from idempotency.tokens.base import check_purpose, consume_submit_token, token_scope

F = TypeVar("F", bound=Callable[..., Any])

#: Methods that never spend a token.
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def header_token(request: Any) -> str | None:
    value = request.headers.get(idempotency_settings.SUBMIT_TOKEN_HEADER)
    value = (value or "").strip()
    return value or None


def missing_token() -> SubmitTokenInvalid:
    return SubmitTokenInvalid(
        f"This action needs a one-time submit token in the "
        f"{idempotency_settings.SUBMIT_TOKEN_HEADER} header."
    )


def _user_scope(request: Any) -> str | None:
    return token_scope(getattr(request, "user", None))


def _request_of(args: tuple[Any, ...]) -> Any:
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

    def check(request: Any) -> HttpResponseBase | None:
        if request.method in SAFE_METHODS:
            return None
        token = header_token(request)
        if token is None:
            return missing_token().as_response()
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


__all__ = ["header_token", "missing_token", "require_submit_token"]
