"""The view the multi-node storms hit: it records each execution where no rollback reaches.

Every run of the view body appends one line (its key) to an ``O_APPEND`` file, outside
any transaction and any store, so a count of lines is a count of executions, whatever
the database or Redis did afterwards.
"""

from __future__ import annotations

import os
import time
import uuid

from django.http import HttpRequest, HttpResponse, JsonResponse

from idempotency import idempotent
from idempotency.scopes import shared
from tests.testapp.models import Effect

#: where executions are appended; set by the test (tests/scale/conftest.py)
EXECUTIONS: dict[str, str] = {"path": ""}


def record_execution(key: str) -> None:
    fd = os.open(EXECUTIONS["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key}\n".encode())
    finally:
        os.close(fd)


@idempotent(scope=shared("scale"))
def charge(request: HttpRequest) -> HttpResponse:
    key = request.headers.get("Idempotency-Key", "")
    record_execution(key)
    if request.GET.get("db") == "1":
        Effect.objects.create(label=key, amount=1)
    # real time: the view's work, timed by the client's query
    time.sleep(float(request.GET.get("sleep", "0")))
    # a fresh uuid per execution: a replay is recognisable by carrying the first one
    return JsonResponse({"key": key, "execution": uuid.uuid4().hex}, status=201)
