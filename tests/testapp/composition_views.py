"""Views that show the middleware composing with Django's request handling (DRF's:
tests/testapp/composition_drf_views.py; the URLs: tests/testapp/composition_urls.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.utils.decorators import method_decorator
from django.views import View

from idempotency import idempotent
from tests.testapp.matrix_bodies import created, work


class Recoverable(Exception):
    """Raised by a view; RecoverMiddleware.process_exception answers for it."""


class RecoverMiddleware:
    """A project's own middleware with ``process_exception`` (must still be called)."""

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> Any:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        if isinstance(exception, Recoverable):
            return JsonResponse({"recovered": str(exception)}, status=503)
        return None


def plain(request: HttpRequest) -> HttpResponse:
    return created(work(request))


@transaction.non_atomic_requests
def non_atomic(request: HttpRequest) -> HttpResponse:
    return created(work(request))


def raising(request: HttpRequest) -> HttpResponse:
    work(request)
    raise Recoverable("handled by RecoverMiddleware")


def streaming(request: HttpRequest) -> StreamingHttpResponse:
    work(request)
    return StreamingHttpResponse(iter([b"chunk-1,", b"chunk-2"]), content_type="text/plain")


def echo_body(request: HttpRequest) -> HttpResponse:
    """Answers with the raw body it reads (after the middleware fingerprinted it)."""
    work(request, 1)
    return HttpResponse(request.body, status=201, content_type="application/octet-stream")


@method_decorator(idempotent, name="dispatch")
class DispatchDecorated(View):
    """``@idempotent`` on ``dispatch``: the middleware must not handle the key a second time."""

    def post(self, request: HttpRequest) -> HttpResponse:
        return created(work(request))


@idempotent
def _decorated(request: HttpRequest) -> HttpResponse:
    return created(work(request))


def hidden_decorated(request: HttpRequest) -> HttpResponse:
    """A project's own wrapper that hides the ``@idempotent`` inside from the middleware."""
    return _decorated(request)
