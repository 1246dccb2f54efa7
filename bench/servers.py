"""The servers a run measures, the services they use, and what the report says of the
machine.

Each variant gets its own server (gunicorn with 2 sync workers, or uvicorn for the ASGI
variants) with its settings module; :func:`prepare_services` creates the database,
migrates every settings module and flushes the benchmark's Redis database first.
:func:`machine_facts` and :func:`loadavg` describe the machine in the report, and
:func:`log` is the run's progress on stderr.
"""

from __future__ import annotations

import http.client
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import env

if TYPE_CHECKING:
    from bench.variants import Variant


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def machine_facts() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts = {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
    }
    try:
        from django.db import connection

        with connection.cursor() as cursor:
            mysql = connection.vendor == "mysql"
            cursor.execute("SELECT VERSION()" if mysql else "SHOW server_version")
            row = cursor.fetchone()
            facts["postgresql"] = (
                (f"(none: MySQL {row[0]})" if mysql else str(row[0])) if row else "?"
            )
    except Exception as exc:  # noqa: BLE001 - a fact we report, not a failure
        facts["postgresql"] = f"? ({exc})"
    try:
        import redis

        facts["redis"] = str(redis.Redis.from_url(env.REDIS_URL).info("server")["redis_version"])
    except Exception as exc:  # noqa: BLE001
        facts["redis"] = f"? ({exc})"
    import django
    import rest_framework

    facts["django"] = django.get_version()
    facts["drf"] = rest_framework.VERSION
    try:
        wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True)
        facts["wrk"] = (wrk.stdout or wrk.stderr).split("[", 1)[0].strip()
    except OSError:
        facts["wrk"] = "?"
    return facts


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


ROOT = Path(__file__).resolve().parent.parent
WORKERS = 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerError(RuntimeError):
    """A server did not start, or died."""


@dataclass
class Server:
    """One gunicorn (2 sync workers), or one uvicorn (2 workers, ``asgi``), on 127.0.0.1
    with one settings module."""

    name: str
    settings: str
    asgi: bool = False
    port: int = field(default_factory=free_port)
    log: Path | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, log_dir: Path) -> None:
        self.log = log_dir / f"{'uvicorn' if self.asgi else 'gunicorn'}-{self.name}.log"
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": self.settings, "PYTHONUNBUFFERED": "1"}
        command = [
            sys.executable, "-m", "gunicorn", "bench.wsgi:application",
            "--workers", str(WORKERS), "--worker-class", "sync",
            "--bind", f"127.0.0.1:{self.port}",
            "--chdir", str(ROOT), "--log-level", "warning", "--graceful-timeout", "5",
        ]  # fmt: skip
        if self.asgi:
            command = [
                sys.executable, "-m", "uvicorn", "bench.asgi:application",
                "--workers", str(WORKERS), "--host", "127.0.0.1", "--port", str(self.port),
                "--log-level", "warning", "--no-access-log",
            ]  # fmt: skip
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until /bench/health/ answers 200 from both workers' listening socket."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise ServerError(f"server {self.name} exited:\n{self.log_tail()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/bench/health/")
                status = conn.getresponse().status
                conn.close()
                # uvicorn's supervisor may have a helper child beside its workers
                if status == 200 and len(self.worker_pids()) >= WORKERS:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise ServerError(f"server {self.name} not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def check_alive(self) -> None:
        if self.process is None or self.process.poll() is not None:
            raise ServerError(f"server {self.name} died:\n{self.log_tail()}")

    def worker_pids(self) -> list[int]:
        if self.process is None:
            return []
        pid = self.process.pid
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return []
        return [int(child) for child in children]

    def peak_worker_rss_mib(self) -> float:
        """The largest peak resident set (VmHWM) of the workers, in MiB."""
        peak = 0
        for pid in self.worker_pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
            except OSError:
                continue
        return peak / 1024

    def log_tail(self, lines: int = 30) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)  # the gunicorn master stops its workers
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)


def prepare_services(variants: Iterable[Variant]) -> None:
    """Create the database when missing, migrate every settings module, flush our Redis db."""
    import redis

    db = env.database_settings()
    if db["ENGINE"].endswith("mysql"):
        import MySQLdb  # type: ignore[import-untyped]

        admin = MySQLdb.connect(
            host=db["HOST"], port=int(db["PORT"]), user=db["USER"], password=db["PASSWORD"]
        )
        admin.cursor().execute(
            f"CREATE DATABASE IF NOT EXISTS `{db['NAME']}` CHARACTER SET utf8mb4"
        )
        admin.close()
    else:
        _create_postgresql_database(db)
    redis.Redis.from_url(env.REDIS_URL).flushdb()
    for settings in sorted({v.settings for v in variants}):
        done = subprocess.run(
            [sys.executable, "-m", "django", "migrate", "--noinput", "-v", "0",
             f"--settings={settings}"],
            cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            raise ServerError(f"migrate failed for {settings}:\n{done.stdout}\n{done.stderr}")


def _create_postgresql_database(db: dict[str, Any]) -> None:
    import psycopg

    admin = psycopg.connect(
        host=db["HOST"],
        port=db["PORT"],
        user=db["USER"],
        password=db["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    )
    with admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db["NAME"]])
        if exists.fetchone() is None:
            admin.execute(f'CREATE DATABASE "{db["NAME"]}"')
            print(f"[bench] created database {db['NAME']}", file=sys.stderr, flush=True)


@contextmanager
def running(
    variants: Iterable[Variant], prefix: str = "idem-bench-"
) -> Iterator[dict[str, Server]]:
    """Each variant's server started and ready (logs in a new temporary directory),
    stopped on the way out."""
    servers = {v.name: Server(v.name, v.settings, asgi=v.asgi) for v in variants}
    logs = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        log(f"starting {len(servers)} servers (logs in {logs})")
        for server in servers.values():
            server.start(logs)
        for server in servers.values():
            server.wait_ready()
        yield servers
    finally:
        for server in servers.values():
            server.stop()
