"""A Django Ninja API: ``@idempotent`` on a sync and an async operation, and a router that
``protect()`` puts under one policy. Each body counts its runs by the key it served."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from django.http import HttpRequest
from django.urls import path
from ninja import NinjaAPI, Router, Schema

from idempotency import idempotent
from idempotency.contrib.ninja import protect

#: How many times an operation's body ran, by the ``Idempotency-Key`` it served.
RUNS: Counter[str] = Counter()
#: Set by a test to run inside the body (a storm holds the winner there).
INSIDE: list[Any] = []
_lock = threading.Lock()


class Pay(Schema):
    amount: int


def _run(request: HttpRequest, payload: Pay, name: str) -> dict[str, Any]:
    for hook in INSIDE:
        hook()
    key = request.headers.get("Idempotency-Key", "")
    with _lock:
        RUNS[key] += 1
        run = RUNS[key]
    return {"operation": name, "amount": payload.amount, "run": run}


api = NinjaAPI(urls_namespace="no-drf")


@api.post("/pay")
@idempotent
def pay(request: HttpRequest, payload: Pay) -> dict[str, Any]:
    return _run(request, payload, "pay")


@api.post("/apay")
@idempotent
async def apay(request: HttpRequest, payload: Pay) -> dict[str, Any]:
    return _run(request, payload, "apay")


router = Router()


@router.post("/refund")
def refund(request: HttpRequest, payload: Pay) -> dict[str, Any]:
    return _run(request, payload, "refund")


@router.get("/balance")
def balance(request: HttpRequest) -> dict[str, int]:
    return {"runs": sum(RUNS.values())}


api.add_router("/protected", protect(router, required=True))

urlpatterns = [path("api/", api.urls)]
