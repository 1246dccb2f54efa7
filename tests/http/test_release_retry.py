"""A release that fails is retried (issue 20, item 8): when the owner's PostgreSQL
session is ended mid-request (``pg_terminate_backend``), lease mode releases the key on
a fresh connection, so the client's retry runs at once instead of getting 409 until the
lease runs out."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings

from idempotency import signals
from tests.support.drf import with_drf
from tests.testapp import edge_views

pytestmark = [pytest.mark.server_db, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def released() -> Iterator[list[str]]:
    seen: list[str] = []

    def receive(**kwargs: Any) -> None:
        seen.append(kwargs["key"])

    signals.released.connect(receive)
    edge_views.RUNS.clear()
    yield seen
    signals.released.disconnect(receive)
    connection.close()


@pytest.mark.parametrize("url", with_drf(["/killed/", "/async-killed/"], ["/api-killed/"]))
def test_the_key_is_released_after_the_owners_session_was_terminated(
    client_a: Client, released: list[str], url: str
) -> None:
    client_a.raise_request_exception = False
    key = str(uuid.uuid4())
    with override_settings(ROOT_URLCONF="tests.testapp.edge_urls", IDEMPOTENCY={"LEASE": 60}):
        first = client_a.post(url, HTTP_IDEMPOTENCY_KEY=key)
        retry = client_a.post(url, HTTP_IDEMPOTENCY_KEY=key)
    # its database session was gone: the view failed (a DRF view's error goes through the
    # project's exception handler, which answers a lost database 503: config/problems.py)
    assert first.status_code == (503 if url == "/api-killed/" else 500)
    assert released == [key]  # released on a fresh connection
    assert retry.status_code == 201, retry.content  # not 409 for the next 60 s
    assert json.loads(retry.content)["run"] == 2
    assert edge_views.RUNS[url] == 2
