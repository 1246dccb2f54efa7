"""``idempotency.client``'s decisions, against a real HTTP server that answers from a script.

The server (``http.server`` on a free port) answers each request with the next answer of
its script and records what it received, so each test sees the client's every attempt:
its key, its timing, and that nothing is retried that should not be. The sample under
gunicorn behind a lossy network is ``tests/sample/test_client.py``; the retry decisions
without a server are ``tests/test_client.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from idempotency.client import (
    AsyncIdempotentClient,
    DeadlineExceeded,
    IdempotentClient,
    KeyMismatch,
    KeyRejected,
    RetryEvent,
    RetryPolicy,
)

Answer = tuple[int, dict[str, str], dict[str, Any] | None]
FAST = RetryPolicy(deadline=10, timeout=2.0, backoff=0.01, max_backoff=0.05)


def problem(status: int, code: str, **headers: str) -> Answer:
    return status, {"Content-Type": "application/problem+json", **headers}, {"code": code}


CREATED: Answer = (201, {"Content-Type": "application/json"}, {"id": 1})
REPLAYED: Answer = (
    201,
    {"Content-Type": "application/json", "Idempotent-Replayed": "true"},
    {"id": 1},
)


class Scripted:
    """Answers requests with ``script`` in order (the last answer repeats)."""

    def __init__(self, script: list[Answer]) -> None:
        self.script = script
        self.received: list[dict[str, Any]] = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                scripted.received.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "key": self.headers.get("Idempotency-Key"),
                        "body": body,
                        "at": time.monotonic(),
                    }
                )
                index = min(len(scripted.received), len(scripted.script)) - 1
                status, headers, payload = scripted.script[index]
                content = json.dumps(payload).encode() if payload is not None else b""
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted() -> Iterator[Any]:
    servers: list[Scripted] = []

    def start(*script: Answer) -> Scripted:
        servers.append(Scripted(list(script)))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_importing_the_client_needs_no_django_settings() -> None:
    code = (
        "import sys; import idempotency.client as c; "
        "assert c.IdempotentClient and c.AsyncIdempotentClient; "
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))"
    )
    env = {"PATH": "/usr/bin:/bin"}  # no DJANGO_SETTINGS_MODULE
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"  # not even imported


def test_one_key_per_operation_reused_on_every_retry(scripted: Any) -> None:
    server = scripted(
        problem(503, "idempotency-store-unavailable", **{"Retry-After": "0"}),
        problem(500, "server-error"),
        REPLAYED,
    )
    with IdempotentClient(server.url, policy=FAST) as client:
        answer = client.post("/pay/", json={"amount": "1.00"})
        second = client.post("/pay/", json={"amount": "1.00"})
    first_keys = [r["key"] for r in server.received[:3]]
    assert len(set(first_keys)) == 1 and first_keys[0] == answer.key
    assert len(first_keys[0]) == 36  # a UUID4
    assert {r["body"] for r in server.received} == {b'{"amount":"1.00"}'}
    assert answer.status_code == 201 and answer.attempts == 3 and answer.replayed
    assert second.key != answer.key  # a new operation, a new key


def test_a_given_key_and_header_name_are_used(scripted: Any) -> None:
    server = scripted(CREATED)
    with IdempotentClient(server.url, policy=FAST, header="Idempotency-Key") as client:
        answer = client.put("/thing/1/", json={}, key="my-key-1")
    assert server.received[0]["key"] == "my-key-1" == answer.key
    assert not answer.replayed


def test_other_4xx_are_returned_at_once(scripted: Any) -> None:
    server = scripted(problem(409, "order-not-payable"), problem(404, "not-found"))
    with IdempotentClient(server.url, policy=FAST) as client:
        assert client.post("/a/").status_code == 409  # a 409 that is not "in progress"
        assert client.post("/b/").status_code == 404
    assert len(server.received) == 2


def test_a_mismatch_and_a_refused_key_raise_without_a_retry(scripted: Any) -> None:
    server = scripted(
        problem(422, "idempotency-key-mismatch"), problem(400, "idempotency-key-invalid")
    )
    with IdempotentClient(server.url, policy=FAST) as client:
        with pytest.raises(KeyMismatch) as mismatch:
            client.post("/a/", key="k1")
        with pytest.raises(KeyRejected):
            client.post("/a/", key="k2")
    assert mismatch.value.key == "k1" and mismatch.value.response.status_code == 422
    assert len(server.received) == 2


def test_a_request_in_progress_is_retried_after_retry_after(scripted: Any) -> None:
    server = scripted(
        problem(409, "idempotency-request-in-progress", **{"Retry-After": "1"}), REPLAYED
    )
    events: list[RetryEvent] = []
    with IdempotentClient(server.url, policy=FAST, on_retry=events.append) as client:
        answer = client.post("/pay/")
    assert answer.replayed and answer.attempts == 2
    first, second = server.received
    assert second["at"] - first["at"] >= 1.0  # not before the server said
    assert [(e.status, e.attempt, e.retry_after) for e in events] == [(409, 1, 1.0)]
    assert 1.0 <= events[0].wait <= 1.1


def test_a_retry_after_past_the_deadline_gives_up_at_once(scripted: Any) -> None:
    server = scripted(problem(409, "idempotency-request-in-progress", **{"Retry-After": "60"}))
    started = time.monotonic()
    with (
        IdempotentClient(server.url, policy=RetryPolicy(deadline=30)) as client,
        pytest.raises(DeadlineExceeded) as raised,
    ):
        client.post("/pay/")
    # no 60 s sleep that could only end in failure, nor one to the 30 s deadline (the bound
    # leaves a loaded process room to stall: 2 s with a 5 s deadline did not)
    assert time.monotonic() - started < 10
    assert raised.value.may_have_happened  # another attempt with this key is running
    assert "past the deadline" in str(raised.value)
    assert raised.value.last_response is not None
    assert raised.value.last_response.status_code == 409


def test_nothing_listening_is_reported_as_not_happened() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    policy = RetryPolicy(deadline=1.0, timeout=0.5, backoff=0.05, max_backoff=0.2)
    with (
        IdempotentClient(f"http://127.0.0.1:{port}", policy=policy) as client,
        pytest.raises(DeadlineExceeded) as raised,
    ):
        client.post("/pay/")
    error = raised.value
    assert not error.may_have_happened
    assert "did NOT happen" in str(error)
    assert isinstance(error.last_error, httpx.ConnectError)
    assert error.attempts >= 2


def test_safe_methods_are_retried_without_a_key(scripted: Any) -> None:
    server = scripted(problem(502, "bad-gateway"), (200, {}, {"ok": True}))
    with IdempotentClient(server.url, policy=FAST) as client:
        answer = client.get("/orders/")
        with pytest.raises(ValueError):
            client.get("/orders/", key="k")
    assert answer.status_code == 200 and answer.key is None
    assert [r["key"] for r in server.received] == [None, None]


def test_the_async_client_follows_the_same_rules(scripted: Any) -> None:
    server = scripted(
        problem(503, "idempotency-store-unavailable", **{"Retry-After": "0"}), REPLAYED
    )

    async def pay() -> Any:
        async with AsyncIdempotentClient(server.url, policy=FAST) as client:
            return await client.post("/pay/", json={"x": 1})

    answer = asyncio.run(pay())
    assert answer.replayed and answer.attempts == 2
    assert server.received[0]["key"] == server.received[1]["key"] == answer.key


def _documented(name: str) -> Any:
    """The function ``name`` as the clients how-to defines it (its block, run alone)."""
    page = Path(__file__).resolve().parents[1] / "docs" / "howto" / "clients.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    (block,) = [b for b in blocks if f"def {name}(" in b]
    namespace: dict[str, Any] = {}
    exec(compile(block, str(page), "exec"), namespace)  # noqa: S102 - our own docs
    return namespace[name]


def test_the_documented_urllib3_settings_retry_with_one_key(scripted: Any) -> None:
    in_progress = problem(409, "idempotency-request-in-progress", **{"Retry-After": "1"})
    server = scripted(in_progress, problem(502, "bad-gateway"), REPLAYED)
    session = _documented("retrying_session")()
    answer = _documented("post_with_key")(session, server.url + "/pay/", {"x": 1}, token="t")
    assert answer.status_code == 201 and answer.headers["Idempotent-Replayed"] == "true"
    first, second, third = server.received
    assert first["key"] == second["key"] == third["key"] is not None
    assert {r["method"] for r in server.received} == {"POST"}
    assert second["at"] - first["at"] >= 1.0  # urllib3 waited the 409's Retry-After
