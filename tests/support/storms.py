"""Threads released together, and storms of duplicate requests built on them.

Every concurrent test starts its threads through :func:`run_threads`: one barrier
releases them at once, each closes its database connections when done (a thread's
connection is its own), an exception becomes that thread's result, and a thread still
running at the deadline fails the test instead of leaving it to hang.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import connections
from django.test import Client

T = TypeVar("T")

#: duplicates per storm of the HTTP contract tests
STORM = 50


def run_threads(
    count: int, target: Callable[[int], T], *, timeout: float = 120
) -> list[T | BaseException]:
    """Run ``target(0..count-1)`` in ``count`` threads released together; each one's result,
    or the exception it raised."""
    barrier = threading.Barrier(count, timeout=60)
    results: list[T | BaseException] = [RuntimeError("did not run")] * count

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = target(index)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    return results


class Overlap:
    r"""Proof that racing calls overlapped, without a sleep: each racing thread calls
    :meth:`enter` as it makes its call, and the call that wins (a body, a held lock)
    :meth:`hold`\ s until all ``count`` have entered. A test whose threads never overlap
    fails here, instead of passing on calls that merely ran one after another."""

    def __init__(self, count: int, *, timeout: float = 60) -> None:
        self.count, self.timeout, self.entered = count, timeout, 0
        self._lock = threading.Lock()
        self._all_in = threading.Event()

    def enter(self) -> None:
        with self._lock:
            self.entered += 1
            if self.entered >= self.count:
                self._all_in.set()

    def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)``, entered first."""
        self.enter()
        return function(*args, **kwargs)

    def hold(self) -> None:
        """Return once every racing call has entered (they ran while the caller held)."""
        assert self._all_in.wait(self.timeout), f"{self.entered} of {self.count} calls came in"

    async def ahold(self) -> None:
        """:meth:`hold` for tasks of one event loop: yields to them while it waits."""
        deadline = time.monotonic() + self.timeout
        while not self._all_in.is_set():
            assert time.monotonic() < deadline, f"{self.entered} of {self.count} calls came in"
            await asyncio.sleep(0)  # real time: none, sleep(0) yields to the loop's other tasks


def succeeded(results: list[T | BaseException]) -> list[T]:
    """The results of :func:`run_threads`, failing the test on the first exception."""
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


def storm(
    client_factory: Callable[[], Client], url: str, key: str, body: Any, n: int = STORM
) -> list[Any]:
    """``n`` identical JSON ``POST``\\ s with one ``key``, released together; the responses."""

    def fire(_index: int) -> Any:
        client = client_factory()
        client.raise_request_exception = False
        return client.post(
            url, data=json.dumps(body), content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
        )

    return succeeded(run_threads(n, fire))


def wait_until(condition: Callable[[], Any], *, timeout: float, interval: float = 0.05) -> Any:
    """Poll ``condition`` until it is true or ``timeout`` seconds pass; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)  # real time: polling what another thread, process or server sets


@dataclass
class Answer:
    key: str
    status: int
    body: bytes
    replayed: bool
    at: float


@dataclass
class Storm:
    """``duplicates`` anonymous clients per key, all released at once; each retries 5xx and
    409 answers until it gets a 2xx or ``patience`` seconds pass (0: one attempt)."""

    keys: list[str]
    duplicates: int
    url: str = "/charge/"
    patience: float = 0.0
    pause: float = 0.1
    answers: list[Answer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> Storm:
        senders = [key for key in self.keys for _ in range(self.duplicates)]
        succeeded(run_threads(len(senders), lambda i: self._fire(senders[i]), timeout=300))
        return self

    def _fire(self, key: str) -> None:
        client = Client(raise_request_exception=False)
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
            time.sleep(self.pause)  # real time: a retrying client's pause, as in production

    def statuses(self) -> Counter[int]:
        return Counter(a.status for a in self.answers)

    def successes(self, key: str) -> list[Answer]:
        return [a for a in self.answers if a.key == key and 200 <= a.status < 300]
