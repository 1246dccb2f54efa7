"""Storms for the multi-node tests: concurrent duplicates, with retries, counted by execution."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connections
from django.test import Client


def executions(path: Path) -> Counter[str]:
    """How many times the view body ran, per key (tests/scale/views.py appends them)."""
    if not path.exists():
        return Counter()
    return Counter(line for line in path.read_text().splitlines() if line)


@dataclass
class Answer:
    key: str
    status: int
    body: bytes
    replayed: bool
    at: float


@dataclass
class Storm:
    """``duplicates`` threads per key, all released at once; each retries 5xx and 409 answers
    until it gets a 2xx or ``patience`` seconds pass (0: one attempt)."""

    keys: list[str]
    duplicates: int
    url: str = "/charge/"
    patience: float = 0.0
    pause: float = 0.1
    answers: list[Answer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> Storm:
        barrier = threading.Barrier(len(self.keys) * self.duplicates)
        threads = [
            threading.Thread(target=self._fire, args=(key, barrier))
            for key in self.keys
            for _ in range(self.duplicates)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return self

    def _fire(self, key: str, barrier: threading.Barrier) -> None:
        client = Client(raise_request_exception=False)
        try:
            barrier.wait()
            deadline = time.monotonic() + self.patience
            while True:
                response: Any = client.post(
                    self.url, data=b"{}", content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
                )
                answer = Answer(
                    key,
                    response.status_code,
                    response.content,
                    response.get("Idempotent-Replayed") == "true",
                    time.monotonic(),
                )
                with self._lock:
                    self.answers.append(answer)
                if answer.status < 300 or time.monotonic() >= deadline:
                    return
                time.sleep(self.pause)
        finally:
            connections.close_all()

    def statuses(self) -> Counter[int]:
        return Counter(a.status for a in self.answers)

    def successes(self, key: str) -> list[Answer]:
        return [a for a in self.answers if a.key == key and 200 <= a.status < 300]
