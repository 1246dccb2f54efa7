"""Real Celery worker processes (``celery worker --pool=solo``) on the test database."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.conf import settings

from tests.support.counting import unique
from tests.support.processes import WorkerProcess
from tests.support.services import BROKER_URL, ROOT, broker_redis, tests_database_url
from tests.support.storms import wait_until

#: the Celery app the workers run
CELERY_APP = "tests.testapp.celery_app"


@dataclass
class Worker(WorkerProcess):
    """A ``celery worker --pool=solo`` subprocess of :mod:`tests.testapp.celery_app`."""

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
                CELERY_APP,
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

    def drain(self, timeout: float = 30) -> None:
        """Return once the worker has handled every message queued to it before now: a probe
        sent behind them runs only after them (one process, one task at a time, in order)."""
        from tests.testapp import celery_app

        task_id = unique("probe")
        celery_app.probe.apply_async(task_id=task_id, queue=self.queue)
        client = broker_redis()
        ran = wait_until(lambda: client.llen(f"beyond:postrun:{task_id}"), timeout=timeout)
        assert ran, f"the probe did not run:\n{self.output()}"


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
            "IDEMPOTENCY_TEST_WORKER": "1",  # tests/settings.py: no ledger database
        }
    )
    return env
