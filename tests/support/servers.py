"""A real ASGI server (uvicorn) for the interface matrix, on a free loopback port.

The test binds the socket itself (port 0, so the kernel picks a free port) and
hands the file descriptor to uvicorn, so no other process can take the port in
between. The server is stopped, by its own pid, when the context exits.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def uvicorn_server(env: dict[str, str], *, startup_timeout: float = 30.0) -> Iterator[str]:
    """Run ``uvicorn tests.asgi:application`` with ``env``; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}"
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "tests.asgi:application",
            "--fd",
            str(sock.fileno()),
            "--lifespan",
            "off",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env={**os.environ, **env},
        pass_fds=(sock.fileno(),),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    sock.close()  # the server holds its own copy
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"uvicorn exited: {log.read().decode(errors='replace')}")
            try:
                urllib.request.urlopen(f"{base_url}/m/ready/", timeout=2)  # noqa: S310
            except urllib.error.HTTPError:
                break  # it answered (404): up
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("uvicorn did not start in time") from None
                time.sleep(0.1)  # real time: waiting for uvicorn to listen
            else:
                break
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.seek(0)
        output = log.read().decode(errors="replace")
        log.close()
        if "Traceback" in output:
            sys.stderr.write(f"uvicorn log:\n{output}\n")
