"""Plain Django views covering every way of applying the library, each with a countable
side effect (DRF's: tests.testapp.drf_views)."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

from django.db import transaction
from django.db.models import F
from django.http import (
    FileResponse,
    HttpRequest,
    HttpResponse,
    JsonResponse,
    StreamingHttpResponse,
)
from django.views import View

from idempotency import get_recovery_point, idempotent, recovery_point
from tests.testapp.executions import record_execution
from tests.testapp.models import Effect, Wallet


class Gate:
    """Where a body called with ``?hold=1`` stops, inside its transaction after its writes
    (``?hold=before``: before them, holding no locks): it sets ``entered`` and waits (30 s
    at most) for a test to set ``release``. With
    ``holds=n`` only the first ``n`` bodies stop; the later ones run through."""

    def __init__(self, holds: int | None = None) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.holds = holds
        self._lock = threading.Lock()

    def stop(self) -> None:
        with self._lock:
            if self.holds is not None:
                if self.holds <= 0:
                    return
                self.holds -= 1
        self.entered.set()
        self.release.wait(30)


#: The gate of ``?hold=1`` bodies (the ``gate`` fixture puts a fresh one here per test).
HOLD = Gate()


def _label(request: Any) -> str:
    return str(request.META.get("HTTP_IDEMPOTENCY_KEY", "-"))


def _effect(request: Any) -> Effect:
    """The side effect: one Effect row, and the wallet debited (in one transaction)."""
    try:
        # a DRF request's parsed data (tests.testapp.drf_views), or a plain request's JSON
        data = request.data if hasattr(request, "data") else json.loads(request.body or b"{}")
        amount = int(data.get("amount", 1))
    except (ValueError, TypeError, AttributeError):
        data, amount = {}, 1
    delay = float(request.GET.get("sleep", "0"))
    record_execution(_label(request))
    if request.GET.get("hold") == "before":  # stop before the writes: no locks held
        HOLD.stop()
    with transaction.atomic():
        effect = Effect.objects.create(label=str(data.get("label", "x")), amount=amount)
        Wallet.objects.filter(pk=1).update(balance=F("balance") - amount)
        if delay:
            time.sleep(delay)  # real time: the view's work, as long as the request asks
        if request.GET.get("hold") == "1":
            HOLD.stop()
    return effect


@idempotent
def function_view(request: HttpRequest) -> HttpResponse:
    effect = _effect(request)
    return JsonResponse({"id": effect.pk, "amount": effect.amount}, status=201)


@idempotent(mode="lease")
def lease_function_view(request: HttpRequest) -> HttpResponse:
    effect = _effect(request)
    return JsonResponse({"id": effect.pk, "amount": effect.amount}, status=201)


@idempotent(required=True)
def outcome_view(request: HttpRequest) -> HttpResponse:
    """Answers with the status the test asks for, after a side effect."""
    code = int(request.GET.get("status", "201"))
    effect = _effect(request)
    if request.GET.get("raise"):
        raise RuntimeError("boom")
    if request.GET.get("binary"):
        body = bytes(range(256)) * 4
        response = HttpResponse(body, status=code, content_type="application/octet-stream")
        response["Content-Disposition"] = 'attachment; filename="blob.bin"'
        response.set_cookie("session-ish", "secret")
        response["X-Request-Id"] = "per-request"
        return response
    return JsonResponse({"id": effect.pk, "status": code}, status=code)


@idempotent(mode="lease", lease=0.5)
def crash_view(request: HttpRequest) -> HttpResponse:
    effect = _effect(request)
    return JsonResponse({"id": effect.pk}, status=201)


#: The "shipping service" of phases_view: down while True (tests flip it).
SHIPPING_DOWN = {"down": False}


@idempotent(mode="lease")
def phases_view(request: HttpRequest) -> HttpResponse:
    """Multi-step work with recovery points: step two fails while shipping is down, and the
    retry with the same key resumes after step one instead of charging again."""
    point, data = get_recovery_point(request)
    steps: list[str] = []
    if point == "":
        effect = _effect(request)
        recovery_point(request, "charged", {"effect": effect.pk})
        point, data = "charged", {"effect": effect.pk}
        steps.append("charge")
    if point == "charged":
        if SHIPPING_DOWN["down"]:
            raise RuntimeError("shipping failed")
        steps.append("ship")
    return JsonResponse(
        {"effect": data["effect"], "steps": steps, "resumed": steps[:1] != ["charge"]},
        status=201,
    )


@idempotent(mode="lease")
def stale_owner_view(request: HttpRequest) -> HttpResponse:
    """Saves a recovery point as an owner whose lease was taken over: its fence is no
    longer the record's (StaleOwner)."""
    context = request.idempotency  # type: ignore[attr-defined]
    context.fence += 1
    recovery_point(request, "charged")
    return JsonResponse({}, status=201)


@idempotent(mode="lease")
async def async_view(request: HttpRequest) -> HttpResponse:
    from asgiref.sync import sync_to_async

    effect = await sync_to_async(_effect)(request)
    if request.GET.get("raise"):
        raise RuntimeError("boom")
    return JsonResponse({"id": effect.pk}, status=201)


class DjangoEffectView(View):
    """A Django class-based view with @idempotent on its method."""

    @idempotent
    def post(self, request: HttpRequest) -> HttpResponse:
        effect = _effect(request)
        return JsonResponse({"id": effect.pk}, status=201)


def plain_view(request: HttpRequest) -> HttpResponse:
    """No decorator: used under the middleware."""
    effect = _effect(request)
    return JsonResponse({"id": effect.pk}, status=201)


@idempotent(mode="lease", on_store_unavailable="run")
def fail_open_view(request: HttpRequest) -> HttpResponse:
    """Runs without idempotency when its store is unreachable (an explicit opt-out)."""
    effect = _effect(request)
    return JsonResponse({"id": effect.pk}, status=201)


@idempotent(mode="lease")
def context_view(request: HttpRequest) -> HttpResponse:
    """Shows what the view sees of its key: ``request.idempotency``."""
    context = request.idempotency  # type: ignore[attr-defined]
    effect = _effect(request)
    return JsonResponse(
        {"id": effect.pk, "taken_over": context.taken_over, "reference": context.reference},
        status=201,
    )


@idempotent
def stream_view(request: HttpRequest) -> StreamingHttpResponse:
    """A streaming answer after a side effect: ``size`` bytes in 1 KiB chunks."""
    effect = _effect(request)
    size = int(request.GET.get("size", "3000"))
    chunk = f"{effect.pk:08d}".encode() * 128  # 1 KiB naming the effect

    def chunks() -> Iterator[bytes]:
        for start in range(0, size, len(chunk)):
            yield chunk[: min(len(chunk), size - start)]

    return StreamingHttpResponse(chunks(), status=201, content_type="application/octet-stream")


@idempotent
def file_view(request: HttpRequest) -> FileResponse:
    effect = _effect(request)
    return FileResponse(
        io.BytesIO(f"receipt {effect.pk}\n".encode() * 50),
        status=201,
        content_type="text/plain",
    )


@idempotent
def big_view(request: HttpRequest) -> HttpResponse:
    """A plain (not streaming) response of ``size`` bytes."""
    effect = _effect(request)
    size = int(request.GET.get("size", "3000"))
    return HttpResponse(
        (f"{effect.pk:08d}" * (size // 8 + 1))[:size], status=201, content_type="text/plain"
    )


def _two_database_effect(request: HttpRequest) -> HttpResponse:
    """Writes to the default database and to ``ledger``; ``?fail=1`` answers 500 after."""
    effect = _effect(request)
    Effect.objects.using("ledger").create(label=_label(request), amount=effect.amount)
    if request.GET.get("fail"):
        return JsonResponse({"error": "downstream failed"}, status=500)
    return JsonResponse({"id": effect.pk}, status=201)


two_database_view = idempotent(databases=["default", "ledger"])(_two_database_effect)
store_database_only_view = idempotent(_two_database_effect)
