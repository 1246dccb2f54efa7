"""Views answering with what a payments team keeps out of the store (issue 36, finding 6):
each echoes a card number it was sent, after a counted side effect; and, where DRF is
installed, the library's token view (DRF's), as it is and with keys handled
(tests/testapp/drf_views.py)."""

from __future__ import annotations

import json
from typing import Any

from django.apps import apps
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.cache import never_cache

from idempotency import idempotent
from tests.testapp.executions import record_execution


def _answer(request: HttpRequest) -> JsonResponse:
    record_execution(str(request.META.get("HTTP_IDEMPOTENCY_KEY", "-")))
    data: dict[str, Any] = json.loads(request.body or b"{}")
    return JsonResponse(
        {
            "payment": "pay_1",
            "card": {"pan": data.get("pan", ""), "brand": "visa"},
            "cvv": data.get("cvv", ""),
        },
        status=201,
    )


@idempotent
def echo_view(request: HttpRequest) -> HttpResponse:
    return _answer(request)


@idempotent(status_only=True)
def status_only_view(request: HttpRequest) -> HttpResponse:
    response = _answer(request)
    response["Location"] = "/payments/pay_1"
    return response


@idempotent(redact=["pan", "cvv"])
def redacted_view(request: HttpRequest) -> HttpResponse:
    return _answer(request)


@idempotent
@never_cache
def no_store_view(request: HttpRequest) -> HttpResponse:
    return _answer(request)


def plain_echo_view(request: HttpRequest) -> HttpResponse:
    """No decorator: used under the middleware."""
    return _answer(request)


urlpatterns = [
    path("echo/", echo_view),
    path("status-only/", status_only_view),
    path("redacted/", redacted_view),
    path("no-store/", no_store_view),
    path("plain-echo/", plain_echo_view),
]

if apps.is_installed("rest_framework"):
    from idempotency.contrib.drf.tokens import SubmitTokenIssueView
    from tests.testapp import drf_views

    urlpatterns += [
        path("tokens/", SubmitTokenIssueView.as_view()),
        path("idempotent-tokens/", drf_views.IdempotentTokenView.as_view()),
    ]
