"""Load from outside the server: wrk for the steady paths, a burst client for storms."""

from __future__ import annotations

import json
import selectors
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

LUA = Path(__file__).resolve().parent / "lua" / "load.lua"
BODY = b'{"amount": 1, "memo": "bench"}'
SQL_HEADER = "x-bench-sql"
#: fixed concurrency of the steady paths
CONNECTIONS = 4
THREADS = 2


class LoadError(RuntimeError):
    """wrk is missing or failed."""


@dataclass(frozen=True)
class Phase:
    """What one wrk run measured."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    sql: int
    sql_counted: int
    statuses: dict[int, int]
    errors: dict[str, int]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def good_rps(self, status: int) -> float:
        """Responses per second that carry ``status``, the answer the path expects: a fast
        error (django-idempotency-key's 423 when its lock is busy) is not throughput."""
        answered = sum(self.statuses.values())
        if not answered:
            return 0.0
        return self.rps * self.statuses.get(status, 0) / answered

    @property
    def sql_per_request(self) -> float | None:
        return self.sql / self.sql_counted if self.sql_counted else None


def wrk_path() -> str:
    path = shutil.which("wrk")
    if path is None:
        raise LoadError("wrk is not installed: apt-get install -y wrk")
    return path


def run_wrk(
    url: str,
    *,
    mode: str,
    token: str,
    key: str,
    seconds: float,
    connections: int = CONNECTIONS,
) -> Phase:
    """``connections`` connections on ``THREADS`` threads for ``seconds`` against ``url``."""
    command = [
        wrk_path(), f"-t{THREADS}", f"-c{connections}", f"-d{max(1, round(seconds))}s",
        "--timeout", "10s", "-s", str(LUA), url, "--", mode, token, key,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("BENCH_JSON ")), None)
    if done.returncode != 0 or line is None:
        raise LoadError(f"wrk failed ({done.returncode}): {done.stdout}\n{done.stderr}")
    data = json.loads(line.removeprefix("BENCH_JSON "))
    return Phase(
        requests=int(data["requests"]),
        seconds=data["duration_us"] / 1e6,
        p50_ms=data["p50_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        sql=int(data["sql"]),
        sql_counted=int(data["sql_counted"]),
        statuses={int(k): int(v) for k, v in data["statuses"].items()},
        errors={k: int(v) for k, v in data["errors"].items()},
    )


def _request_bytes(path: str, *, token: str | None, key: str | None, port: int) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        f"Content-Length: {len(BODY)}",
        "Connection: close",
    ]
    if token is not None:
        lines.append(f"Authorization: Token {token}")
    if key is not None:
        lines.append(f"Idempotency-Key: {key}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + BODY


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float = 0.0


def _parse(raw: bytes, seconds: float) -> Reply:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines or not lines[0].startswith("HTTP/"):
        return Reply(0, {}, raw, seconds)
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(body)
    return Reply(status, headers, body, seconds)


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";", 1)[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


def _complete(raw: bytes) -> bool:
    """Whether ``raw`` holds a whole response (the client closes then, as wrk does:
    gunicorn waits for the client to close a ``Connection: close`` exchange)."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return False
    lowered = head.lower()
    marker = b"\r\ncontent-length:"
    if marker in lowered:
        length = int(lowered.split(marker, 1)[1].split(b"\r\n", 1)[0])
        return len(body) >= length
    if b"transfer-encoding: chunked" in lowered:
        return body.endswith(b"0\r\n\r\n")
    return False  # delimited by the server closing


def post(port: int, path: str, *, token: str | None, key: str | None) -> Reply:
    """One POST of the bench body (``Connection: close``), read to the end."""
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(_request_bytes(path, token=token, key=key, port=port))
        raw = b""
        while not _complete(raw) and (chunk := sock.recv(65536)):
            raw += chunk
    return _parse(raw, time.perf_counter() - started)


@dataclass
class Storm:
    """A burst of requests with one key, all sent at once."""

    replies: list[Reply] = field(default_factory=list)
    effects: int = 0
    balance_change: int = 0

    @property
    def statuses(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for reply in self.replies:
            counts[reply.status] = counts.get(reply.status, 0) + 1
        return counts

    @property
    def sql(self) -> int:
        return sum(int(r.headers.get(SQL_HEADER, 0)) for r in self.replies)


def storm(
    port: int,
    path: str,
    *,
    token: str,
    key: str,
    size: int,
    distinct: bool = False,
    timeout: float = 60,
) -> Storm:
    """``size`` connections, opened first, then each sends one request with ``key`` at once
    (``distinct``: ``key-0``, ``key-1``, …: a burst of first requests instead).

    Latency is from the moment the burst is sent to the end of each response; the
    server's listen backlog queues what its two workers cannot take yet.
    """
    payloads = [
        _request_bytes(path, token=token, key=f"{key}-{i}" if distinct else key, port=port)
        for i in range(size)
    ]
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=timeout) for _ in range(size)]
    selector = selectors.DefaultSelector()
    buffers: dict[socket.socket, list[bytes]] = {}
    finished: dict[socket.socket, float] = {}
    try:
        started = time.perf_counter()
        for sock, payload in zip(sockets, payloads, strict=True):
            sock.sendall(payload)
        for sock in sockets:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            buffers[sock] = []
        deadline = started + timeout
        while len(finished) < size and time.perf_counter() < deadline:
            for event, _ in selector.select(timeout=1.0):
                ready = event.fileobj
                assert isinstance(ready, socket.socket)
                sock = ready
                chunk = sock.recv(65536)
                buffers[sock].append(chunk)
                if not chunk or _complete(b"".join(buffers[sock])):
                    finished[sock] = time.perf_counter() - started
                    selector.unregister(sock)
                    sock.close()
    finally:
        selector.close()
        for sock in sockets:
            sock.close()
    result = Storm()
    for sock in sockets:
        seconds = finished.get(sock)
        if seconds is None:
            result.replies.append(Reply(0, {}, b"", timeout))  # no answer: counted as status 0
        else:
            result.replies.append(_parse(b"".join(buffers[sock]), seconds))
    return result
