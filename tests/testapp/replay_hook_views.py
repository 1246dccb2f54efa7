"""Views with an ``on_replay`` hook (issue 46, item 4), one per interface: ``@idempotent``
on a function view and an async view, a Ninja operation with ``@idempotent`` and a router
under ``protect()`` (DRF's: tests/testapp/replay_hook_drf_views.py; the URLs:
tests/testapp/replay_hook_urls.py); and hooks that break the rules. Each body counts its
execution."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI, Router
from ninja.responses import Status
from ninja.security import django_auth

from idempotency import idempotent
from idempotency.contrib.ninja import protect
from idempotency.core.job import ReplayedRecord
from tests.testapp.executions import record_execution

#: Every hook call: (the hook's name, the request's path, the record's key).
CALLS: list[tuple[str, str, str]] = []


def ran(request: Any) -> dict[str, Any]:
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
        return JsonResponse(ran(request), status=201)

    return view


@idempotent(on_replay=stamp("async"))
async def async_view(request: HttpRequest) -> HttpResponse:
    from asgiref.sync import sync_to_async

    return JsonResponse(await sync_to_async(ran)(request), status=201)


def bare_view(request: HttpRequest) -> HttpResponse:
    """No decorator: only ``IdempotencyMiddleware`` takes its keys."""
    return JsonResponse(ran(request), status=201)


api = NinjaAPI(urls_namespace="replay-hooks", auth=django_auth)


@api.post("/decorated", response={201: dict})
@idempotent(on_replay=stamp("ninja-decorator"))
def ninja_decorated(request: HttpRequest) -> Status[dict[str, Any]]:
    return Status(201, ran(request))


router = Router()


@router.post("/protected", response={201: dict})
def ninja_protected(request: HttpRequest) -> Status[dict[str, Any]]:
    return Status(201, ran(request))


protect(router, on_replay=stamp("ninja-protect"))
api.add_router("/r", router)
