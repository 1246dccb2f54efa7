"""Counting what ran: a thread-safe counter of a body's executions, the signals received.

Executions that must survive rollbacks and processes are appended to a file instead
(:mod:`tests.testapp.executions`).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Counter:
    """Counts a body's executions (thread-safe); calling it returns the new count."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            self.count += 1
            return self.count


def unique(prefix: str) -> str:
    """A name no other test uses: ``prefix`` and 12 random hex digits."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@contextmanager
def received(signal: Any) -> Iterator[list[dict[str, Any]]]:
    """The keyword arguments of each ``signal`` sent while the block runs."""
    seen: list[dict[str, Any]] = []

    def receive(**kwargs: Any) -> None:
        seen.append(kwargs)

    signal.connect(receive)
    try:
        yield seen
    finally:
        signal.disconnect(receive)
