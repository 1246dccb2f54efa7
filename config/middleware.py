"""Problem details for every error of the sample's API, whatever produced it.

DRF views answer through :mod:`config.problems`' exception handler. Everything
else that can fail happens before or around a DRF view: a URL that matches no
route (Django's 404, an HTML page under ``DEBUG``), an exception that escapes a
view (Django's 500, the technical page under ``DEBUG``), a request Django itself
refuses (400 for a bad host, 413 for an oversized body). This middleware, first
in ``MIDDLEWARE``, sees every answer last and turns any error that is not already
JSON into ``application/problem+json`` with a stable ``code``: the same shape under
``DEBUG=0`` and ``DEBUG=1`` (where it also hides the technical page's stack trace).
Django still logs the exception and sends ``got_request_exception`` first.

The admin and the shop keep their HTML pages (``/admin/``, ``/shop/``, ``/static/``);
the shop's JSON endpoint (``/shop/checkout/pay/``) answers problem details itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from http import HTTPStatus

from django.http import HttpRequest, HttpResponse, HttpResponseBase

from idempotency import problem_response

#: Answers left alone: the admin's and the shop's pages, and the static files.
HTML_PREFIXES = ("/admin/", "/shop/", "/static/")
#: Headers of the original answer kept on the problem (``Allow`` of a 405, ...).
KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate", "Vary", "Idempotent-Replayed")

#: status -> (code, title, detail)
PROBLEMS: dict[int, tuple[str, str, str]] = {
    400: ("bad-request", "Invalid request", "The request is malformed."),
    403: ("permission-denied", "Permission denied", "You may not do this."),
    404: ("not-found", "Not found", "No such resource."),
    405: ("method-not-allowed", "Method not allowed", "This method is not allowed here."),
    413: ("request-too-large", "Request too large", "The request body is too large."),
    500: ("server-error", "Server error", "The server failed to handle this request."),
}


def problem_for_status(status: int) -> tuple[str, str, str]:
    """The ``(code, title, detail)`` of an error status (any status, known or not)."""
    if status in PROBLEMS:
        return PROBLEMS[status]
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Server error" if status >= 500 else "Error"
    return re.sub(r"[^a-z0-9]+", "-", phrase.lower()).strip("-"), phrase, f"{phrase}."


def is_json(response: HttpResponseBase) -> bool:
    content_type = response.get("Content-Type", "").split(";")[0].strip().lower()
    return content_type == "application/json" or content_type.endswith("+json")


class ProblemDetailsMiddleware:
    """Turn every non-JSON error answer (outside the admin) into problem details."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if response.status_code < 400 or is_json(response):
            return response
        if request.path_info.startswith(HTML_PREFIXES):
            return response
        code, title, detail = problem_for_status(response.status_code)
        problem: HttpResponse = problem_response(response.status_code, code, title, detail)
        for name in KEPT_HEADERS:
            if name in response:
                problem[name] = response[name]
        return problem
