"""The quick tier (``python3 dev.py test``) touches no service it was not told about.

The README promises that it needs nothing but Python: with no ``DATABASE_URL``,
``REDIS_URL`` or ``CELERY_TEST_BROKER_URL``, a run must not connect to a Redis, a
database or a broker that happens to listen on the machine (a Celery signal handler
connected at import once wrote ``beyond:postrun:*`` keys into db 14 of any local Redis).
Every connection of the run is watched through the interpreter's ``socket.connect``
audit event (``tests.support.connection_watch``), whichever client library makes it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.services import ROOT

#: The services' well-known ports: Redis, Sentinel, PostgreSQL, PgBouncer, MySQL/MariaDB,
#: AMQP (RabbitMQ), memcached. The tests' own servers listen on ports the OS chose.
SERVICE_PORTS = {6379, 26379, 5432, 6432, 3306, 5672, 11211}

#: What points a run at a service; the run below has none of it.
SERVICE_VARIABLES = (
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_TEST_BROKER_URL",
    "CELERY_BROKER_URL",
    "CELERY_RESULT_BACKEND",
    "IDEMPOTENCY_STORE",
    "IDEMPOTENCY_RESPONSE_CACHE",
    "IDEMPOTENCY_LOCK_BACKEND",
    "IDEMPOTENCY_TEST_REQUIRE_SERVICES",
    "IDEMPOTENCY_TEST_ALL",
    "PYTEST_ADDOPTS",
)

#: One quick-tier run: every test module is collected (imported: its import-time
#: connections are watched too), and the tests that once wrote uninvited run (Celery
#: tasks run in process; the sample's outbox and its broker).
WATCHED_RUN = ["tests", "-k", "tasks or outbox"]


def watched(log: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARIABLES}
    env["IDEMPOTENCY_TEST_CONNECTIONS"] = str(log)
    return subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def connections(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def to_services(lines: list[str]) -> list[str]:
    return [line for line in lines if line.rpartition(" ")[2] in {str(p) for p in SERVICE_PORTS}]


def test_the_watch_sees_a_connection(tmp_path: Path) -> None:
    """The control: a connection the watched process makes is written down."""
    log = tmp_path / "connections"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        done = watched(
            log,
            "-c",
            "import socket, tests.support.connection_watch\n"
            f"socket.create_connection(('127.0.0.1', {port})).close()",
        )
    assert done.returncode == 0, done.stderr
    assert connections(log) == [f"127.0.0.1 {port}"]
    assert to_services([f"127.0.0.1 {port}", "127.0.0.1 6379"]) == ["127.0.0.1 6379"]


def test_a_quick_tier_run_connects_to_no_service_it_was_not_told_about(tmp_path: Path) -> None:
    log = tmp_path / "connections"
    ran = watched(
        log,
        *("-m", "pytest", "-q", "-p", "no:cacheprovider"),
        *("-p", "tests.support.connection_watch", *WATCHED_RUN),
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    last = ran.stdout.splitlines()[-1]
    assert " passed" in last and int(last.split(" passed")[0].split()[-1]) >= 20, last
    assert to_services(connections(log)) == []


def test_a_test_whose_service_is_missing_is_skipped_before_its_fixtures_run(
    tmp_path: Path,
) -> None:
    """``tests/test_tenants.py`` needs PostgreSQL and starts its project from a module-scoped
    fixture, which pytest sets up before any of the test's own. On SQLite that fixture once
    ran anyway and pointed a PostgreSQL project at a database named after SQLite's
    in-memory one: two CI streams on SQLite then created and dropped the same database on
    the machine's PostgreSQL, and one failed. The service markers now skip a test before
    any fixture of it runs."""
    ran = watched(
        tmp_path / "connections",
        *("-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "--setup-show"),
        "tests/test_tenants.py",
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert ran.stdout.splitlines()[-1].split(" in ")[0] == "2 skipped", ran.stdout[-3000:]
    assert "(2: needs PostgreSQL)" in ran.stdout, ran.stdout[-3000:]
    set_up = [line.split()[-1] for line in ran.stdout.splitlines() if "SETUP    M" in line]
    assert "found" not in set_up, ran.stdout[-3000:]  # --setup-show: the fixture never ran
