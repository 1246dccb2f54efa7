"""Plain Django views for the contract's edges: forms, uploads, fingerprints, Vary and
Retry-After (DRF's: tests/testapp/edge_drf_views.py; the URLs: tests/testapp/edge_urls.py).

Every view counts its executions in :data:`RUNS` (by path) and answers what it saw, so
a test tells a replay (``Idempotent-Replayed``, no new run) from a second execution.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from idempotency import idempotent
from idempotency.scopes import shared
from idempotency.stores.database import DatabaseStore

RUNS: Counter[str] = Counter()
_lock = threading.Lock()


def ran(request: Any) -> int:
    with _lock:
        RUNS[request.path] += 1
        return RUNS[request.path]


def _seen(request: Any) -> dict[str, Any]:
    files = request.FILES
    return {
        "fields": dict(request.POST.lists()),
        "files": {name: [f.size for f in files.getlist(name)] for name in files},
    }


@idempotent
def form_view(request: HttpRequest) -> HttpResponse:
    run = ran(request)
    return JsonResponse({"run": run, **_seen(request)}, status=201)


@idempotent(mode="lease")
async def async_form_view(request: HttpRequest) -> HttpResponse:
    run = await sync_to_async(ran)(request)
    return JsonResponse({"run": run, **_seen(request)}, status=201)


@idempotent
def vary_view(request: HttpRequest) -> HttpResponse:
    response = JsonResponse({"run": ran(request)}, status=201)
    response["Vary"] = "Accept"
    return response


@idempotent(mode="lease")
async def async_vary_view(request: HttpRequest) -> HttpResponse:
    response = JsonResponse({"run": await sync_to_async(ran)(request)}, status=201)
    response["Vary"] = "Accept, Accept-Language"
    return response


#: The slow views signal STARTED when they begin and finish once a test sets GATE.
STARTED = threading.Event()
GATE = threading.Event()


def _slow(request: Any) -> dict[str, Any]:
    run = ran(request)
    STARTED.set()
    GATE.wait(timeout=30)
    return {"run": run, "finished": time.monotonic()}


@idempotent(mode="lease")
def slow_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse(_slow(request), status=201)


@idempotent(mode="lease")
async def async_slow_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse(await sync_to_async(_slow)(request), status=201)


def sizes(request: Any) -> dict[str, list[int]]:
    return {name: [f.size for f in request.FILES.getlist(name)] for name in request.FILES}


@csrf_exempt  # a real client (the gunicorn memory test) posts no CSRF token
@idempotent(scope=shared("uploads"))
def upload_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"run": ran(request), "files": sizes(request)}, status=201)


@idempotent(scope=shared("uploads"), mode="lease")
async def async_upload_view(request: HttpRequest) -> HttpResponse:
    run = await sync_to_async(ran)(request)
    return JsonResponse({"run": run, "files": sizes(request)}, status=201)


def terminate_own_session() -> None:
    """End this thread's database session from another connection, as an operator's
    ``pg_terminate_backend`` or MySQL's ``KILL`` (or a failover) would, and wait until the
    server has ended it."""
    from django.db import connection

    connection.ensure_connection()
    config = connection.settings_dict
    if connection.vendor == "mysql":
        import MySQLdb

        thread = connection.connection.thread_id()
        admin = MySQLdb.connect(
            host=config["HOST"] or "127.0.0.1",
            port=int(config["PORT"] or 3306),
            user=config["USER"],
            passwd=config["PASSWORD"] or "",
        )
        try:
            admin.cursor().execute(f"KILL {int(thread)}")
        finally:
            admin.close()
        return
    import psycopg

    pid = connection.connection.info.backend_pid
    with psycopg.connect(
        host=config["HOST"] or "127.0.0.1",
        port=config["PORT"] or 5432,
        user=config["USER"],
        dbname=config["NAME"],
        autocommit=True,
    ) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


def killed(request: Any) -> dict[str, Any]:
    """The first run loses its database session mid-request; its next query fails."""
    from django.contrib.auth import get_user_model

    run = ran(request)
    if run == 1:
        terminate_own_session()
    return {"run": run, "users": get_user_model().objects.count()}


@idempotent(mode="lease", store=DatabaseStore())
def killed_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse(killed(request), status=201)


@idempotent(mode="lease", store=DatabaseStore())
async def async_killed_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse(await sync_to_async(killed)(request), status=201)


def outer_vary_middleware(get_response: Any) -> Any:
    """An outer middleware that varies every response on X-Outer, as SessionMiddleware
    does on Cookie (sync only: Django adapts it for async views)."""
    from django.utils.cache import patch_vary_headers

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        patch_vary_headers(response, ["X-Outer"])
        return response  # type: ignore[no-any-return]

    return middleware
