"""Plain Django views: ``@idempotent`` on a sync and an async function view, on a method of
a class-based view, and a view only ``IdempotencyMiddleware`` serves."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from idempotency import idempotent

#: How many times each view's body ran, by the name it answers with.
RUNS: Counter[str] = Counter()


def _answer(name: str, request: HttpRequest) -> JsonResponse:
    RUNS[name] += 1
    body = json.loads(request.body or b"{}")
    return JsonResponse({"view": name, "run": RUNS[name], "amount": body.get("amount")}, status=201)


@csrf_exempt
@idempotent
def function_view(request: HttpRequest) -> JsonResponse:
    return _answer("function", request)


@csrf_exempt
@idempotent
async def async_view(request: HttpRequest) -> JsonResponse:
    return _answer("async", request)


class ClassView(View):
    @idempotent
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
        return _answer("class", request)


@csrf_exempt
def middleware_view(request: HttpRequest) -> JsonResponse:
    return _answer("middleware", request)


urlpatterns = [
    path("function/", function_view),
    path("async/", async_view),
    path("class/", csrf_exempt(ClassView.as_view())),
    path("middleware/", middleware_view),
]
