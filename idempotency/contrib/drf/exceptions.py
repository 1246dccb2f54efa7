"""The library's errors in DRF views.

:class:`~idempotency.exceptions.IdempotencyError` is a plain exception (the core does not
import DRF), shaped as DRF's ``APIException``. Two ways make a DRF view answer one:

- :func:`exception_handler`, as ``REST_FRAMEWORK["EXCEPTION_HANDLER"]`` (or called first
  by a project's own handler), answers any of them raised in a view as its RFC 9457
  problem, the response the library answers everywhere else;
- :class:`APIError` carries one as an ``APIException``, for DRF code that must raise
  what any exception handler renders (a permission, such as
  :class:`~idempotency.contrib.drf.tokens.SubmitTokenPermission`).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from idempotency.exceptions import IdempotencyError


class APIError(exceptions.APIException):
    """``error`` as DRF's ``APIException``: its status, ``detail``, code and ``title``,
    and its ``Retry-After`` as ``wait`` (which DRF's handler sends as that header)."""

    def __init__(self, error: IdempotencyError) -> None:
        super().__init__(error.detail, error.default_code)
        self.error = error
        self.status_code = error.status_code
        self.default_code = error.default_code
        self.title = error.title
        retry_after = error.headers().get("Retry-After")
        self.wait = int(retry_after) if retry_after else None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | HttpResponse | None:
    """DRF's ``EXCEPTION_HANDLER``: the library's errors as their problem response (the
    view's transaction rolled back, as DRF does for its own), anything else to DRF's
    default handler."""
    if isinstance(exc, APIError):
        exc = exc.error
    if isinstance(exc, IdempotencyError):
        set_rollback()
        return exc.as_response()
    return drf_exception_handler(exc, context)
