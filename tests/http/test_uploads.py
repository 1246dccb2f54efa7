"""Keyed uploads of any size (issue 20, item 2): a multipart body is fingerprinted as
Django's upload handlers write it (to disk past FILE_UPLOAD_MAX_MEMORY_SIZE), never
held in memory whole, so a keyed upload is accepted wherever an unkeyed one is, and
costs the worker no more memory.

The request body is streamed from a file on disk into Django's request handling (as a
WSGI server passes ``wsgi.input``), so the test itself never holds it in memory either,
and the worker's memory is the peak of Python's allocations while one request runs."""

from __future__ import annotations

import json
import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from django.test.client import ClientHandler

from tests.support.drf import with_drf
from tests.support.uploads import BOUNDARY, MB, write_body
from tests.testapp import edge_views

VIEWS = with_drf(["/upload/", "/async-upload/"], ["/api-upload/"])


def send(body: Path, url: str, key: str | None) -> tuple[Any, int]:
    """POST the body in ``body`` to ``url``; the response and the peak memory (bytes)
    Python allocated while the request ran."""
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": url,
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_TYPE": f"multipart/form-data; boundary={BOUNDARY}",
        "CONTENT_LENGTH": str(body.stat().st_size),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": None,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    if key is not None:
        environ["HTTP_IDEMPOTENCY_KEY"] = key
    handler = ClientHandler(enforce_csrf_checks=False)
    with body.open("rb") as stream:
        environ["wsgi.input"] = stream
        tracemalloc.start()
        tracemalloc.reset_peak()
        try:
            response = handler(environ)
            _size, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return response, peak


@pytest.fixture
def uploads(db: Any) -> Iterator[None]:
    edge_views.RUNS.clear()
    with override_settings(ROOT_URLCONF="tests.testapp.edge_urls"):
        yield


@pytest.mark.usefixtures("uploads")
@pytest.mark.parametrize("url", VIEWS)
@pytest.mark.parametrize("megabytes", [3, 10])
def test_keyed_and_unkeyed_uploads_over_the_memory_limit(
    tmp_path: Path, url: str, megabytes: int
) -> None:
    body = tmp_path / "body"
    write_body(body, megabytes * MB)
    plain, _ = send(body, url, None)
    assert plain.status_code == 201, plain.content
    key = str(uuid.uuid4())
    first, _ = send(body, url, key)
    again, _ = send(body, url, key)
    assert first.status_code == 201, first.content
    assert json.loads(first.content)["files"] == {"doc": [megabytes * MB]}
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    write_body(body, megabytes * MB, fill=b"v")  # same size, other bytes
    other, _ = send(body, url, key)
    assert other.status_code == 422
    assert edge_views.RUNS[url] == 2  # the unkeyed request and the first keyed one


@pytest.mark.usefixtures("uploads")
@pytest.mark.parametrize("url", VIEWS)
def test_a_keyed_100_mb_upload_costs_no_more_memory_than_an_unkeyed_one(
    tmp_path: Path, url: str
) -> None:
    body = tmp_path / "body"
    write_body(body, 100 * MB)
    plain, unkeyed_peak = send(body, url, None)
    key = str(uuid.uuid4())
    first, keyed_peak = send(body, url, key)
    again, replay_peak = send(body, url, key)
    assert plain.status_code == 201
    assert first.status_code == 201, first.content
    assert json.loads(first.content)["files"] == {"doc": [100 * MB]}
    assert again["Idempotent-Replayed"] == "true"
    print(
        f"{url}: peak unkeyed {unkeyed_peak / MB:.2f} MB, keyed {keyed_peak / MB:.2f} MB, "
        f"replay {replay_peak / MB:.2f} MB"
    )
    # the hash reads the upload in chunks: at most a chunk or two more than unkeyed
    assert keyed_peak <= unkeyed_peak + 1 * MB
    assert replay_peak <= unkeyed_peak + 1 * MB
    assert keyed_peak < 10 * MB  # nowhere near the body's 100 MB
