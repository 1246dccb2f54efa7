"""A keyed 100 MB upload costs a real worker process no more memory than an unkeyed one
(issue 20, item 2): gunicorn, one sync worker, on PostgreSQL; the worker's peak
resident memory (VmHWM) is read from /proc after each upload."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support import services
from tests.support.ports import free_port
from tests.support.uploads import BOUNDARY, MB, write_body

pytestmark = [pytest.mark.server_db, pytest.mark.django_db(transaction=True)]


def _peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _worker(master: int) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.1)  # real time: waiting for gunicorn to fork its worker
    raise AssertionError("gunicorn started no worker")


def _upload(port: int, url: str, body: Path, key: str | None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {
        "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
        "Content-Length": str(body.stat().st_size),
    }
    if key:
        headers["Idempotency-Key"] = key
    try:
        with body.open("rb") as stream:
            conn.request("POST", url, body=stream, headers=headers)  # streamed in blocks
            response = conn.getresponse()
            return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("url", ["/e/upload/", "/e/api-upload/"])
def test_a_keyed_100_mb_upload_does_not_raise_the_workers_memory(tmp_path: Path, url: str) -> None:
    small, big = tmp_path / "small", tmp_path / "big"
    write_body(small, 1 * MB)
    write_body(big, 100 * MB)
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.server_settings",
        "DATABASE_URL": services.tests_database_url(),
    }
    command = [
        sys.executable, "-m", "gunicorn", "tests.wsgi:application", "--workers", "1",
        "--worker-class", "sync", "--bind", f"127.0.0.1:{port}", "--chdir", str(services.ROOT),
        "--log-level", "warning", "--timeout", "120",
    ]  # fmt: skip
    log = tmp_path / "gunicorn.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            command, cwd=services.ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        worker = _worker(server.pid)
        deadline = time.monotonic() + 60
        while True:  # ready, and both paths warmed up (imports, connections)
            try:
                assert _upload(port, url, small, None)[0] == 201
                assert _upload(port, url, small, str(uuid.uuid4()))[0] == 201
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)  # real time: waiting for gunicorn to answer
        warm = _peak_kb(worker)
        status, _ = _upload(port, url, big, None)
        unkeyed = _peak_kb(worker)
        key = str(uuid.uuid4())
        keyed_status, content = _upload(port, url, big, key)
        keyed = _peak_kb(worker)
        replay_status, replayed = _upload(port, url, big, key)
        after_replay = _peak_kb(worker)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(15)
    assert status == keyed_status == replay_status == 201, log.read_text()
    assert json.loads(content)["files"] == {"doc": [100 * MB]}
    assert replayed == content
    print(
        f"{url}: worker peak RSS {warm / 1024:.1f} MB warm, {unkeyed / 1024:.1f} MB after the "
        f"unkeyed 100 MB upload, {keyed / 1024:.1f} MB after the keyed one, "
        f"{after_replay / 1024:.1f} MB after its replay"
    )
    assert unkeyed - warm < 20 * 1024  # the upload went to disk, not memory
    assert keyed - unkeyed < 5 * 1024  # a key adds no more than a few MB of peak RSS
    assert after_replay - unkeyed < 5 * 1024
