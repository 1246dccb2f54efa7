"""The profiler hook of :mod:`bench.breakdown`: the request thread's CPU time charged to
the innermost *kind* of code on the stack (``sys.setprofile``, clock ``time.thread_time``),
with every Python and C function call counted by kind."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

#: Kinds of code, innermost first wins; see :func:`classify`.
KINDS = (
    "sql",
    "transaction",
    "redis",
    "cache client",
    "signals",
    "logging",
    "capture/replay",
    "encoding",
    "fingerprint/key",
    "layer",
    "django/drf",
    "other",
)

_TRANSACTION_FUNCTIONS = frozenset(
    {
        "commit",
        "_commit",
        "rollback",
        "_rollback",
        "set_autocommit",
        "_set_autocommit",
        "savepoint",
        "_savepoint",
        "savepoint_commit",
        "_savepoint_commit",
        "savepoint_rollback",
        "_savepoint_rollback",
        "on_commit",
        "run_and_clear_commit_hooks",
    }
)
_ENCODING_FUNCTIONS = frozenset(
    {"headers_json", "from_parts", "encode_result", "decode_result", "_json", "_data", "_text"}
)


def classify(code: CodeType) -> str | None:
    """The kind of a Python function, or None to inherit its caller's."""
    path = code.co_filename.replace("\\", "/")
    name = code.co_name
    if "/idempotency/" in path:
        tail = path.rsplit("/idempotency/", 1)[1]
        if tail.startswith("http/responses"):
            return "capture/replay"
        if tail.startswith(("http/fingerprints", "http/keys")):
            return "fingerprint/key"
        if name in _ENCODING_FUNCTIONS:
            return "encoding"
        return "layer"
    if "/django/db/backends/" in path:
        return "transaction" if name in _TRANSACTION_FUNCTIONS else "sql"
    if "/django/db/transaction.py" in path:
        return "transaction"
    if "/psycopg/" in path or "/psycopg_binary/" in path:
        return None  # the driver: charged to the SQL or transaction call above it
    if "/django_redis/" in path:
        return "cache client"
    if "/redis/" in path or "/hiredis/" in path:
        return "redis"
    if "/django/dispatch/" in path:
        return "signals"
    if path.endswith("/logging/__init__.py"):
        return "logging"
    if "/django/" in path or "/rest_framework/" in path or "/asgiref/" in path:
        return "django/drf"
    if "/bench/" in path:
        return "django/drf"  # the view's own body
    return None


class Split:
    """Charges the request thread's CPU time to the innermost kind of code running."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = dict.fromkeys(KINDS, 0.0)
        self.events: dict[str, int] = dict.fromkeys(KINDS, 0)  # Python call/return
        self.c_events: dict[str, int] = dict.fromkeys(KINDS, 0)  # C call/return
        self._kinds: dict[CodeType, str | None] = {}
        self._stack: list[str] = ["other"]
        self._last = 0.0

    def _hook(self, frame: FrameType, event: str, arg: Any) -> None:
        now = time.thread_time()
        stack = self._stack
        current = stack[-1]
        self.cpu[current] += now - self._last
        if event.startswith("c_"):
            self.c_events[current] += 1
        else:
            self.events[current] += 1
        if event == "call":
            code = frame.f_code
            try:
                kind = self._kinds[code]
            except KeyError:
                kind = self._kinds[code] = classify(code)
            stack.append(kind or current)
        elif event == "c_call":
            stack.append(current)
        elif len(stack) > 1:  # return, c_return, c_exception
            stack.pop()
        self._last = time.thread_time()

    def run(self, work: Callable[[], object]) -> None:
        self._stack = ["other"]
        self._last = time.thread_time()
        sys.setprofile(self._hook)
        try:
            work()
        finally:
            sys.setprofile(None)
        self.cpu["other"] += time.thread_time() - self._last

    def corrected(self, per_event: tuple[float, float], requests: int) -> dict[str, float]:
        """µs per request per kind, the hook's residual cost per event taken off."""
        py, c = per_event
        return {
            kind: max(0.0, self.cpu[kind] - self.events[kind] * py - self.c_events[kind] * c)
            / requests
            * 1e6
            for kind in KINDS
        }


def hook_cost_per_event() -> tuple[float, float]:
    """CPU seconds the hook adds per Python and per C call event that its own clock reads
    do not exclude (the best of a few tries of each)."""

    def empty() -> None:
        return None

    def python_calls() -> None:
        for _ in range(20000):
            empty()

    def c_calls() -> None:
        items: list[int] = []
        for _ in range(20000):
            len(items)

    def cost(work: Callable[[], None], events: Callable[[Split], int]) -> float:
        best = float("inf")
        for _ in range(5):
            started = time.thread_time()
            work()
            bare = time.thread_time() - started
            split = Split()
            split.run(work)
            charged = sum(split.cpu.values())
            best = min(best, max(0.0, charged - bare) / max(1, events(split)))
        return best

    py = cost(python_calls, lambda split: sum(split.events.values()))
    c = cost(c_calls, lambda split: sum(split.c_events.values()))
    return py, c
