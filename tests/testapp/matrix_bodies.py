"""The body every view of the interface matrix (tests/testapp/matrix_views.py) and of the
composition views (tests/testapp/composition_views.py) runs, and its execution count:
plain Django, needing neither DRF nor Django Ninja.

Every view body appends one line to an O_APPEND file (``MATRIX_COUNTER_FILE``)
before anything else: a rollback cannot undo it, so the tests count executions
of the body, not committed rows. Each answer carries a fresh random ``run`` so
a replay that re-ran the view cannot be byte-identical.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection
from django.http import HttpRequest, JsonResponse

from tests.testapp.models import Effect

COUNTER_ENV = "MATRIX_COUNTER_FILE"
#: amounts the views accept (a database integer column holds them all)
LIMIT = 10**9


def count(probe: str) -> None:
    """Record one execution of a view body (survives any rollback)."""
    fd = os.open(os.environ[COUNTER_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{probe}\n".encode())
    finally:
        os.close(fd)


def executions(probe: str) -> int:
    try:
        with open(os.environ[COUNTER_ENV]) as f:
            return sum(1 for line in f if line.rstrip("\n") == probe)
    except FileNotFoundError:
        return 0


def _amount(request: Any) -> int:
    try:
        if hasattr(request, "data"):  # DRF's Request: what its parsers read
            data: Any = request.data
        elif request.content_type == "application/json":
            data = json.loads(request.body or b"{}")
        else:
            data = request.POST
        amount = int(data.get("amount", 1))
    except (ValueError, TypeError, AttributeError, RecursionError, OverflowError):
        return 1  # int(Infinity) overflows: the fuzz test found it (a 500 from the view)
    return amount if abs(amount) <= LIMIT else 1


def work(request: Any, amount: int | None = None, *, linger: bool = True) -> dict[str, Any]:
    """The body of every matrix view: count, write a row, optionally linger (``?sleep=``)."""
    probe = str(request.headers.get("X-Probe", ""))
    count(probe)
    amount = _amount(request) if amount is None else amount
    Effect.objects.create(label=probe[:255], amount=amount)
    delay = float(request.GET.get("sleep", "0"))
    if delay and linger:
        time.sleep(delay)  # real time: the view's work, as long as the request asks
    return {"run": uuid.uuid4().hex, "amount": amount, "atomic": connection.in_atomic_block}


async def awork(request: HttpRequest) -> dict[str, Any]:
    result = await sync_to_async(work)(request, linger=False)
    delay = float(request.GET.get("sleep", "0"))
    if delay:
        await asyncio.sleep(delay)  # real time: the view's work, as long as the request asks
    return result


def created(data: dict[str, Any]) -> JsonResponse:
    return JsonResponse(data, status=201)
