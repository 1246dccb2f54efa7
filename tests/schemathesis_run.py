"""Run schemathesis against the sample's own OpenAPI schema: ``python3 dev.py schemathesis``.

A fresh SQLite database (migrated, the demo users seeded), the sample served by
``runserver`` on a free port, then ``schemathesis run --checks all`` with alice's token,
one fresh Idempotency-Key per case (:mod:`tests.schemathesis_hooks`) and the exceptions
of ``tests/schemathesis.toml``, within ``--max-time`` seconds (CI: 90). Any failure
fails the run.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("the sample server exited before it answered")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)  # real time: waiting for the sample server to listen
    raise SystemExit("the sample server did not start within 60 s")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-time", type=int, default=90)
    parser.add_argument("--seed", type=int, default=None)
    options, rest = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
        env |= {
            "DATABASE_URL": f"sqlite:///{tmp}/schemathesis.sqlite3",
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, check=True)
        seeded = subprocess.run(
            [*manage, "seed_demo"], env=env, check=True, capture_output=True, text=True
        ).stdout
        match = re.search(r"token alice: (\w+)", seeded)
        if match is None:
            raise SystemExit(f"seed_demo printed no token for alice: {seeded}")
        port = free_port()
        with open(Path(tmp) / "server.log", "wb") as log:
            server = subprocess.Popen(
                [*manage, "runserver", "--noreload", "--skip-checks", f"127.0.0.1:{port}"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            try:
                wait_for(port, server)
                command = [
                    str(BIN / "schemathesis"),
                    "--config-file",
                    str(ROOT / "tests" / "schemathesis.toml"),
                    "run",
                    f"http://127.0.0.1:{port}/api/schema/?format=json",
                    "--header",
                    f"Authorization: Token {match.group(1)}",
                    "--max-time",
                    str(options.max_time),
                    "--workers",
                    "1",
                    *(["--seed", str(options.seed)] if options.seed is not None else []),
                    *rest,
                ]
                st_env = env | {"SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks"}
                completed = subprocess.run(
                    command, env=st_env, cwd=tmp, timeout=options.max_time + 120
                )
            finally:
                server.terminate()
                try:
                    server.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    server.kill()
        return completed.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
