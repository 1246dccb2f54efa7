"""Helpers of the beyond-HTTP tests: service URLs, threads that clean up, worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection, connections

from tests.conftest import REQUIRE_SERVICES

ROOT = Path(__file__).resolve().parents[2]
BROKER_URL = os.environ.get("CELERY_TEST_BROKER_URL", "redis://127.0.0.1:6379/14")


def missing(reason: str) -> None:
    """Skip, or fail where the services are required (as the root conftest does)."""
    if REQUIRE_SERVICES:
        pytest.fail(f"required service missing: {reason}")
    pytest.skip(reason)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def broker_redis() -> Any:
    """A redis-py client of the Celery test broker's database (the workers' counters)."""
    import redis

    client = redis.Redis.from_url(BROKER_URL)
    try:
        client.ping()
    except redis.RedisError as exc:
        missing(f"needs the Celery test broker at {BROKER_URL}: {exc}")
    return client


def tests_database_url() -> str:
    """``DATABASE_URL`` of the database the tests run on (pytest-django's ``test_<name>``)."""
    data = connection.settings_dict
    user = quote(data.get("USER") or "")
    password = quote(data.get("PASSWORD") or "")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = data.get("HOST") or "127.0.0.1"
    port = f":{data['PORT']}" if data.get("PORT") else ""
    return f"postgres://{auth}{host}{port}/{quote(data['NAME'])}"


class Counter:
    """Counts a body's executions (thread-safe); calling it returns the new count."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            self.count += 1
            return self.count


def run_threads(count: int, target: Callable[[int], Any]) -> list[Any]:
    """Run ``target(i)`` in ``count`` threads released together; results or exceptions."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = target(index)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def wait_until(condition: Callable[[], Any], *, timeout: float, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            return value
        time.sleep(interval)


@dataclass
class Worker:
    """A ``celery worker --pool=solo`` subprocess of :mod:`tests.beyond.celery_app`."""

    queue: str
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    name: str = field(default_factory=lambda: unique("beyond"))

    def start(self, *, ready_timeout: float = 30.0) -> Worker:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        output = self.log.open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "tests.beyond.celery_app",
                "worker",
                "--pool=solo",
                "--concurrency=1",
                "-Q",
                self.queue,
                "-n",
                f"{self.name}@%h",
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        output.close()
        client = broker_redis()
        ready = wait_until(
            lambda: (
                client.get(f"beyond:ready:{self.process.pid}")  # type: ignore[union-attr]
                or self.process.poll() is not None
            ),  # type: ignore[union-attr]
            timeout=ready_timeout,
        )
        if not ready or self.process.poll() is not None:
            self.stop()
            pytest.fail(f"celery worker did not start:\n{self.output()}")
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL: no shutdown, no acknowledgement, no cleanup."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-6000:]
        except OSError:
            return ""


def worker_env(queue: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": str(settings.SETTINGS_MODULE),
            "DATABASE_URL": tests_database_url(),
            "CELERY_TEST_BROKER_URL": BROKER_URL,
            "BEYOND_CELERY_QUEUE": queue,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
            "CONN_MAX_AGE": "0",
        }
    )
    return env
