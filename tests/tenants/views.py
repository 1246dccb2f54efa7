"""One idempotent view, and a stand-in for token authentication: ``X-User: <pk>`` is
the user of that primary key in the request's tenant schema (loaded after
django-tenants' middleware set the schema, as any authentication would load it)."""

from __future__ import annotations

import json
from collections.abc import Callable

from django.contrib.auth import get_user_model
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path

from idempotency import idempotent

RUNS: list[str] = []


class HeaderUserMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.user = get_user_model().objects.get(pk=int(request.headers["X-User"]))
        return self.get_response(request)


@idempotent
def pay(request: HttpRequest) -> HttpResponse:
    RUNS.append(connection.schema_name)
    body = json.loads(request.body)
    return JsonResponse({"tenant": connection.schema_name, "iban": body["iban"]}, status=201)


urlpatterns = [path("pay/", pay)]
