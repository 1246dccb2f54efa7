"""Views with an ``on_replay`` hook (issue 46, item 4), one per interface: ``@idempotent``
on a function view, an async view and a DRF method, ``IdempotentMixin`` with the method
overridden or the attribute set, a Ninja operation with ``@idempotent`` and a router
under ``protect()``; and hooks that break the rules. Each body counts its execution."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from ninja import NinjaAPI, Router
from ninja.responses import Status
from ninja.security import django_auth
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency import idempotent
from idempotency.contrib.drf.mixins import IdempotentMixin
from idempotency.contrib.ninja import protect
from idempotency.core.job import ReplayedRecord
from tests.testapp.executions import record_execution

#: Every hook call: (the hook's name, the request's path, the record's key).
CALLS: list[tuple[str, str, str]] = []


def _ran(request: Any) -> dict[str, Any]:
    record_execution(str(request.META.get("HTTP_IDEMPOTENCY_KEY", "-")))
    return {"paid": True}


def stamp(name: str) -> Any:
    """A hook that adds an expiry header and a trace id, and notes its call."""

    def on_replay(request: HttpRequest, response: HttpResponse, record: ReplayedRecord) -> None:
        CALLS.append((name, request.path, record.key))
        if record.expires_at is not None:
            response["Idempotency-Expires"] = record.expires_at.isoformat()
        response["X-Trace-Id"] = f"{name}-{request.META.get('HTTP_X_TRACE', '')}"

    on_replay.__qualname__ = f"stamp.{name}"
    return on_replay


def set_cookie(request: HttpRequest, response: HttpResponse, record: ReplayedRecord) -> None:
    response.set_cookie("replayed", "1")


def change_status(request: HttpRequest, response: HttpResponse, record: ReplayedRecord) -> None:
    response.status_code = 200


def change_body(request: HttpRequest, response: HttpResponse, record: ReplayedRecord) -> None:
    response.content = b'{"paid": false}'


def hop_by_hop(request: HttpRequest, response: HttpResponse, record: ReplayedRecord) -> None:
    response["Connection"] = "close"


def unmark(request: HttpRequest, response: HttpResponse, record: ReplayedRecord) -> None:
    del response["Idempotent-Replayed"]


def return_new(request: HttpRequest, response: HttpResponse, record: ReplayedRecord) -> Any:
    return HttpResponse(status=418)


def make(hook: Any) -> Any:
    @idempotent(on_replay=hook)
    def view(request: HttpRequest) -> HttpResponse:
        return JsonResponse(_ran(request), status=201)

    return view


@idempotent(on_replay=stamp("async"))
async def async_view(request: HttpRequest) -> HttpResponse:
    from asgiref.sync import sync_to_async

    return JsonResponse(await sync_to_async(_ran)(request), status=201)


class DecoratedApi(APIView):
    @idempotent(on_replay=stamp("drf-method"))
    def post(self, request: Request) -> Response:
        return Response(_ran(request), status=status.HTTP_201_CREATED)


class MethodApi(IdempotentMixin, APIView):
    """The DRF way: the mixin's method, overridden."""

    def on_replay(self, request: Request, response: HttpResponse, record: ReplayedRecord) -> None:
        CALLS.append(("mixin-method", request.path, record.key))
        response["X-Trace-Id"] = f"mixin-method-{request.META.get('HTTP_X_TRACE', '')}"
        response["X-View"] = type(self).__name__

    def post(self, request: Request) -> Response:
        return Response(_ran(request), status=status.HTTP_201_CREATED)


class AttributeApi(IdempotentMixin, APIView):
    idempotency_on_replay = stamp("mixin-attribute")

    def post(self, request: Request) -> Response:
        return Response(_ran(request), status=status.HTTP_201_CREATED)


class PlainMixinApi(IdempotentMixin, APIView):
    """Neither: the ``ON_REPLAY`` setting applies."""

    def post(self, request: Request) -> Response:
        return Response(_ran(request), status=status.HTTP_201_CREATED)


def bare_view(request: HttpRequest) -> HttpResponse:
    """No decorator: only ``IdempotencyMiddleware`` takes its keys."""
    return JsonResponse(_ran(request), status=201)


api = NinjaAPI(urls_namespace="replay-hooks", auth=django_auth)


@api.post("/decorated", response={201: dict})
@idempotent(on_replay=stamp("ninja-decorator"))
def ninja_decorated(request: HttpRequest) -> Status[dict[str, Any]]:
    return Status(201, _ran(request))


router = Router()


@router.post("/protected", response={201: dict})
def ninja_protected(request: HttpRequest) -> Status[dict[str, Any]]:
    return Status(201, _ran(request))


protect(router, on_replay=stamp("ninja-protect"))
api.add_router("/r", router)

urlpatterns = [
    path("function/", make(stamp("function"))),
    path("plain/", make(None)),
    path("async/", async_view),
    path("drf-method/", DecoratedApi.as_view()),
    path("mixin-method/", MethodApi.as_view()),
    path("mixin-attribute/", AttributeApi.as_view()),
    path("mixin-plain/", PlainMixinApi.as_view()),
    path("cookie/", make(set_cookie)),
    path("status/", make(change_status)),
    path("body/", make(change_body)),
    path("hop-by-hop/", make(hop_by_hop)),
    path("unmark/", make(unmark)),
    path("return/", make(return_new)),
    path("bare/", bare_view),
    path("n/", api.urls),
]
