"""Concurrent duplicates against a real multi-process server: gunicorn, 4 sync workers.

Threads in one process share a Python interpreter; a real deployment runs
several worker processes, each with its own connections. Here 20 duplicates
hit 4 gunicorn workers at once, on PostgreSQL, and every view body records its
execution in an ``O_APPEND`` file the workers share.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rest_framework.authtoken.models import Token

from tests.support import services, storms
from tests.support.ports import free_port
from tests.support.processes import stop_group
from tests.support.stores import STORE_VARIANTS
from tests.testapp.executions import ENV, executions
from tests.testapp.models import Wallet

pytestmark = [pytest.mark.server_db, pytest.mark.django_db(transaction=True)]

WORKERS = 4
DUPLICATES = 20
ROUNDS = 3


def _post(port: int, path: str, token: str, key: str, body: bytes) -> tuple[int, bytes, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(
            "POST",
            path,
            body=body,
            headers={
                "Authorization": f"Token {token}",
                "Content-Type": "application/json",
                "Idempotency-Key": key,
            },
        )
        response = conn.getresponse()
        return response.status, response.read(), response.getheader("Idempotent-Replayed") or ""
    finally:
        conn.close()


class Gunicorn:
    def __init__(self, log_dir: Path, executions_log: Path, config: dict[str, Any]) -> None:
        self.port = free_port()
        self.log = log_dir / "gunicorn.log"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.server_settings",
            "DATABASE_URL": services.tests_database_url(),
            "IDEMPOTENCY_TEST_SETTINGS": json.dumps(config),
            ENV: str(executions_log),
        }
        command = [
            sys.executable, "-m", "gunicorn", "tests.wsgi:application",
            "--workers", str(WORKERS), "--worker-class", "sync",
            "--bind", f"127.0.0.1:{self.port}", "--chdir", str(services.ROOT),
            "--log-level", "warning", "--graceful-timeout", "5", "--timeout", "60",
        ]  # fmt: skip
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command, cwd=services.ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/t/api/")  # 405: no side effect
                conn.getresponse().read()
                conn.close()
                return
            except OSError:
                time.sleep(0.2)  # real time: waiting for gunicorn to listen
        raise AssertionError(f"gunicorn did not start:\n{self.log.read_text()}")

    def stop(self) -> None:
        stop_group(self.process)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    servers: list[Gunicorn] = []

    def start(config: dict[str, Any]) -> Gunicorn:
        server = Gunicorn(tmp_path, tmp_path / "executions.log", config)
        servers.append(server)
        server.wait_ready()
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize(
    "variant", ["db-atomic", "db-lease", pytest.param("redis", marks=pytest.mark.redis)]
)
@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/t/api/?sleep=0.1", b'{"amount": 1}'),
        ("/t/viewset/?sleep=0.1", b'{"label": "x", "amount": 1}'),
    ],
    ids=["decorator-apiview", "mixin-viewset"],
)
def test_duplicates_across_worker_processes_run_the_view_once(
    user: Any, wallet: Wallet, serve: Any, tmp_path: Path, variant: str, url: str, body: bytes
) -> None:
    server = serve(STORE_VARIANTS[variant])
    token = Token.objects.get(user=user).key
    answers: dict[str, list[tuple[int, bytes, str]]] = {}
    for _round in range(ROUNDS):
        key = str(uuid.uuid4())
        results = storms.run_threads(
            DUPLICATES,
            lambda _i, key=key: _post(server.port, url, token, key, body),  # type: ignore[misc]
        )
        assert not [r for r in results if isinstance(r, BaseException)], results
        answers[key] = results
    ran = executions(tmp_path / "executions.log")
    for key, results in answers.items():
        statuses = Counter(status for status, _, _ in results)
        assert ran[key] == 1, f"{variant}: the view ran {ran[key]} times for one key {statuses}"
        assert set(statuses) <= {201, 409}, statuses
        created = [body for status, body, _ in results if status == 201]
        firsts = [r for r in results if r[0] == 201 and r[2] != "true"]
        assert len(firsts) == 1
        assert len(set(created)) == 1  # every replay is byte-identical to the first answer
    assert Wallet.objects.get().balance == 1000 - ROUNDS
