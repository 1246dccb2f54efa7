"""DRF exception handler of the sample project: every error as RFC 9457 problem details."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import set_rollback

from config.middleware import problem_for_status
from idempotency import problem_response
from idempotency.contrib.drf.exceptions import exception_handler
from idempotency.exceptions import PROBLEM_CONTENT_TYPE, problem_body

#: Seconds a client waits before retrying when the sample's own database is unreachable.
DATABASE_RETRY_AFTER = 1

TITLES = {
    400: "Invalid request",
    401: "Authentication required",
    403: "Permission denied",
    404: "Not found",
    405: "Method not allowed",
    406: "Not acceptable",
    409: "Conflict",
    415: "Unsupported media type",
    422: "Unprocessable content",
    429: "Too many requests",
}


#: PostgreSQL's SQLSTATEs of a server going away (class 08 too: connection exceptions).
POSTGRES_GONE = frozenset({"57P01", "57P02", "57P03"})
#: MySQL/MariaDB's errors of a server going away: cannot connect, gone, lost, killed.
MYSQL_GONE = frozenset({2002, 2003, 2006, 2013, 1927, 4031})


def database_unreachable(exc: Exception) -> bool:
    """Whether ``exc`` is the sample's database gone (a session ended, a restart, a
    failover), rather than a query the live database refused (a lock, a deadlock, a
    missing table): only the first is a 503 worth retrying."""
    if isinstance(exc, InterfaceError):
        return True
    cause = exc.__cause__ if isinstance(exc, OperationalError) else None
    driver = type(cause).__module__ if cause is not None else ""
    if driver.startswith("psycopg"):
        state = getattr(cause, "sqlstate", None)
        return state is None or state.startswith("08") or state in POSTGRES_GONE
    if driver.startswith("MySQLdb") and cause is not None and cause.args:
        return cause.args[0] in MYSQL_GONE
    return False


def problem_exception_handler(
    exc: Exception, context: dict[str, Any]
) -> Response | HttpResponse | None:
    """Render DRF's exceptions (and anything mapped to one) as ``application/problem+json``;
    the library's own errors answer their problem (its DRF exception handler).

    The sample's own database lost mid-request (its session ended by
    ``pg_terminate_backend``, a failover, a restart: Django's ``OperationalError`` or
    ``InterfaceError``) is a 503 with ``Retry-After``, not a
    500: the view's transaction rolled back, so a retry with the same key is safe (the
    library released the key: a 5xx is never stored)."""
    if database_unreachable(exc):
        set_rollback()
        return Response(
            problem_body(
                503,
                "database-unavailable",
                "Service unavailable",
                "The database could not be reached; nothing was done. Retry the request.",
            ),
            status=503,
            headers={"Retry-After": str(DATABASE_RETRY_AFTER)},
            content_type=PROBLEM_CONTENT_TYPE,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if not isinstance(response, Response) or not isinstance(exc, exceptions.APIException):
        return response
    status = response.status_code
    extra: dict[str, Any] = {}
    if isinstance(exc, exceptions.ValidationError):
        code = "validation-error"
        detail = "The request has invalid fields; see 'errors'."
        extra["errors"] = exc.detail
    else:
        codes = exc.get_codes()
        code = str(codes if isinstance(codes, str) else getattr(exc, "default_code", "error"))
        code = code.replace("_", "-")
        detail = str(exc.detail) if not isinstance(exc.detail, dict | list) else str(exc.detail)
    title = str(getattr(exc, "title", "") or TITLES.get(status, "Error"))
    response.data = problem_body(status, code, title, detail, **extra)
    response.content_type = PROBLEM_CONTENT_TYPE
    request = context.get("request")
    if request is not None:
        # a problem is JSON whatever the view renders (the schema view's YAML, say)
        request.accepted_renderer = JSONRenderer()
        request.accepted_media_type = JSONRenderer.media_type
    set_rollback()
    return response


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler404``: URLs that match no route answer problem+json too."""
    if request.path_info.startswith("/shop/"):  # the shop's pages answer a page
        return render(request, "shop/not_found.html", status=404)
    return problem_response(404, *problem_for_status(404))


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: an unexpected error, as problem+json and without a stack trace."""
    return problem_response(500, *problem_for_status(500))
