"""Views, a Ninja API, a function and a task that name their store by alias
(``store="records"``), for tests/contract/test_store_aliases.py. The alias is resolved
when a request comes, under whatever ``IDEMPOTENCY["STORES"]`` is then."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from ninja import NinjaAPI, Router
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency import idempotent, idempotent_function
from idempotency.contrib.celery import idempotent_task
from idempotency.contrib.drf.mixins import IdempotentMixin
from idempotency.contrib.ninja import protect
from tests.testapp.celery_app import app

#: How often each label ran.
RUNS: dict[str, int] = {}


def ran(label: str) -> int:
    RUNS[label] = RUNS.get(label, 0) + 1
    return RUNS[label]


@idempotent(store="records")
def decorated(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"run": ran(f"decorated:{request.headers['Idempotency-Key']}")}, status=201)


class Mixin(IdempotentMixin, APIView):
    idempotency_store = "records"

    def post(self, request: Request) -> Response:
        return Response({"run": ran(f"mixin:{request.headers['Idempotency-Key']}")}, status=201)


def plain(request: HttpRequest) -> HttpResponse:
    """No decorator: IdempotencyMiddleware protects it with the "default" store."""
    return JsonResponse({"run": ran(f"plain:{request.headers['Idempotency-Key']}")}, status=201)


api = NinjaAPI(urls_namespace="alias-ninja")
router = Router()


@api.post("/decorated/")
@idempotent(store="records")
def ninja_decorated(request: HttpRequest) -> Any:
    return {"run": ran(f"ninja:{request.headers['Idempotency-Key']}")}


@router.post("/protected/")
def ninja_protected(request: HttpRequest) -> Any:
    return {"run": ran(f"protected:{request.headers['Idempotency-Key']}")}


protect(router, store="records")
api.add_router("/r/", router)


@idempotent_function(key="alias:{ref}", store="records")
def function(ref: str) -> int:
    return ran(f"function:{ref}")


@idempotent_task(app=app, key="alias-task:{ref}", store="records", name="alias.task")
def task(ref: str) -> int:
    return ran(f"task:{ref}")


urlpatterns = [
    path("decorated/", decorated),
    path("mixin/", Mixin.as_view()),
    path("plain/", plain),
    path("n/", api.urls),
]
