"""A fault-injecting TCP proxy for the tests: a lossy network between a client and a server.

It listens on a free loopback port and forwards each connection to ``upstream``, one
HTTP/1.1 request per connection (gunicorn's sync workers close after each answer). A
``plan(identity, attempt)`` picks each request's fate, where ``identity`` is the
request's ``Idempotency-Key`` (or, without one, its request line) and ``attempt`` counts
the requests of that identity from 1:

``"pass"``
    forward the request and the answer.
``"drop"``
    forward the request, read the server's whole answer, then reset the client's
    connection without sending it: the server acted, the client never hears of it.
``"delay"``
    forward the request, read the answer and hold it until the client gives up
    (its read timeout) and hangs up: the answer arrives too late for anyone.
``"reset"``
    reset the connection as soon as the request has arrived, forwarding nothing: the
    server never sees it.

Every request is logged (:class:`Passage`): its identity, fate and the server's status,
so a test can prove the faults struck after the server had answered.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support.services import ROOT

Plan = Callable[[str, int], str]
FATES = ("pass", "drop", "delay", "reset")
#: Longest a "delay" holds an answer for a client that never hangs up (seconds).
LONGEST_HOLD = 60.0


@dataclass(frozen=True)
class Passage:
    identity: str
    attempt: int
    fate: str
    status: int | None  # the server's answer, None when it never got the request


def _read_message(sock: socket.socket) -> bytes:
    """One HTTP message (head and a ``Content-Length`` body) from ``sock``; b"" at EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _identity(request: bytes) -> str:
    head = request.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    for line in head[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"idempotency-key":
            return value.strip().decode("latin-1")
    return head[0].decode("latin-1")


def _status(answer: bytes) -> int | None:
    parts = answer.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def _reset(sock: socket.socket) -> None:
    """Close with an RST (linger 0), as a crashed middlebox does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class FaultProxy:
    def __init__(self, upstream_port: int, plan: Plan) -> None:
        self.upstream_port = upstream_port
        self.plan = plan
        self.passages: list[Passage] = []
        self._attempts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fates(self) -> Counter[tuple[str, int | None]]:
        """How many requests met each (fate, server status)."""
        with self._lock:
            return Counter((p.fate, p.status) for p in self.passages)

    def of(self, identity: str) -> list[Passage]:
        with self._lock:
            return [p for p in self.passages if p.identity == identity]

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        try:
            request = _read_message(client)
            if not request:
                client.close()
                return
            identity = _identity(request)
            with self._lock:
                self._attempts[identity] += 1
                attempt = self._attempts[identity]
            fate = self.plan(identity, attempt)
            if fate not in FATES:
                raise ValueError(f"unknown fate {fate!r}")
            if fate == "reset":
                self._log(Passage(identity, attempt, fate, None))
                _reset(client)
                return
            with socket.create_connection(("127.0.0.1", self.upstream_port), timeout=60) as up:
                up.sendall(request)
                answer = _read_message(up)
            self._log(Passage(identity, attempt, fate, _status(answer)))
            if fate == "pass":
                client.sendall(answer)
                client.close()
            elif fate == "drop":
                _reset(client)
            else:  # delay: hold the answer until the client hangs up
                client.settimeout(LONGEST_HOLD)
                try:
                    while client.recv(65536):
                        pass
                except OSError:
                    pass
                client.close()
        except OSError:
            client.close()

    def _log(self, passage: Passage) -> None:
        with self._lock:
            self.passages.append(passage)

    def close(self) -> None:
        self._closed.set()
        # closing a socket does not wake a thread blocked in its accept(); shutting it
        # down does (the join waited out its timeout, 5 s per proxy, before)
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=5)
        assert not self._thread.is_alive(), "the proxy's accept loop did not stop"


class SampleServer:
    """The sample project under gunicorn (sync workers) on a free port, on the test database.

    ``settings`` is the settings module (default ``tests.sample.server_settings``: the
    sample's, with the demo's naive endpoint routed and no artificial delay); ``env``
    adds environment variables (``IDEMPOTENCY_STORE``, ``IDEMPOTENCY_LEASE``, ...).
    """

    def __init__(
        self,
        log: Path,
        database_url: str,
        *,
        workers: int = 3,
        settings: str = "tests.sample.server_settings",
        env: dict[str, str] | None = None,
    ) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.log = log
        environment = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": settings,
            "DATABASE_URL": database_url,
            **(env or {}),
        }
        command = [
            sys.executable, "-m", "gunicorn", "config.wsgi:application",
            "--workers", str(workers), "--worker-class", "sync",
            "--bind", f"127.0.0.1:{self.port}", "--chdir", str(ROOT),
            "--log-level", "warning", "--graceful-timeout", "5", "--timeout", "60",
        ]  # fmt: skip
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 60) -> SampleServer:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                    sock.sendall(b"GET /api/schema/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                    if sock.recv(12).startswith(b"HTTP/1."):
                        return self
            except OSError:
                time.sleep(0.2)  # real time: waiting for a real server to listen
        raise AssertionError(f"gunicorn did not start:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)  # quick shutdown
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
