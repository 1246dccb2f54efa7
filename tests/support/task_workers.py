"""Real django-tasks-db workers (``manage.py db_worker``) on the test database, running
the tasks of :mod:`tests.testapp.djtasks` (backend ``database``)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings

from tests.support.processes import WorkerProcess
from tests.support.services import ROOT, tests_database_url
from tests.support.storms import wait_until


@dataclass
class DbWorker(WorkerProcess):
    """A ``manage.py db_worker`` subprocess taking the tasks of one queue."""

    queue: str
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self, *, ready_timeout: float = 60.0) -> DbWorker:
        output = self.log.open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "db_worker",
                "--backend=database",
                f"--queue-name={self.queue}",
                "--interval=0.05",
                "--no-startup-delay",
                "--no-reload",
                "--verbosity=2",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        output.close()
        started = wait_until(
            lambda: "Starting worker" in self.output() or self.process.poll() is not None,  # type: ignore[union-attr]  # set above
            timeout=ready_timeout,
        )
        if not started or self.process.poll() is not None:
            self.stop()
            pytest.fail(f"db_worker did not start:\n{self.output()}")
        return self


def db_worker_env(executions: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": str(settings.SETTINGS_MODULE),
            "DATABASE_URL": tests_database_url(),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
            "CONN_MAX_AGE": "0",
            "IDEMPOTENCY_TEST_WORKER": "1",  # tests/settings.py: no ledger database
            "IDEMPOTENCY_TEST_EXECUTIONS": str(executions),
        }
    )
    env.update(extra)
    return env
