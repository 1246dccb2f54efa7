"""Retry-After a client can follow (issue 20, item 1): a 409 for a request in progress
says when its answer is likely ready, not when its lease ends."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from django.test import override_settings

from idempotency.http.responses import retry_after
from tests.support.stores import CACHE_STORE, DB_STORE, REDIS_STORE, using
from tests.support.users import logged_in_client
from tests.testapp import edge_views

STORES = [
    pytest.param(
        using(DB_STORE),
        marks=[pytest.mark.server_db, pytest.mark.django_db(transaction=True)],
        id="database",
    ),
    pytest.param(
        using(REDIS_STORE),
        marks=[pytest.mark.redis, pytest.mark.django_db(transaction=True)],
        id="redis",
    ),
    pytest.param(
        using(CACHE_STORE),
        marks=[pytest.mark.django_db(transaction=True)],
        id="cache",
    ),
]


def test_retry_after_grows_with_the_claims_age_and_never_passes_the_lease() -> None:
    assert retry_after(60.0, 60.0) == 1  # a young claim: RETRY_AFTER
    assert retry_after(59.6, 60.0) == 1
    assert retry_after(20.0, 60.0) == 10  # 40 s old: a quarter of it
    assert retry_after(2.0, 60.0) == 2  # never past the remaining lease
    assert retry_after(0.2, 60.0) == 1  # at least a second
    with override_settings(IDEMPOTENCY={"RETRY_AFTER": 3}):
        assert retry_after(60.0, 60.0) == 3
        assert retry_after(1.5, 60.0) == 2


@pytest.fixture
def gate() -> Iterator[None]:
    edge_views.RUNS.clear()
    edge_views.STARTED.clear()
    edge_views.GATE.clear()
    yield
    edge_views.GATE.set()


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("url", ["/slow/", "/async-slow/"])
def test_a_client_sleeping_for_retry_after_gets_its_replay_soon_after_completion(
    user: Any, store: dict[str, Any], url: str
) -> None:
    key = str(uuid.uuid4())
    first: dict[str, Any] = {}
    first_client, client = logged_in_client(user), logged_in_client(user)

    def run_first() -> None:
        response = first_client.post(url, HTTP_IDEMPOTENCY_KEY=key)
        first["response"] = response
        first["done"] = time.monotonic()
        connections.close_all()

    with override_settings(ROOT_URLCONF="tests.testapp.edge_urls", IDEMPOTENCY=store):
        thread = threading.Thread(target=run_first)
        thread.start()
        assert edge_views.STARTED.wait(timeout=30), first
        answers = []
        response = client.post(url, HTTP_IDEMPOTENCY_KEY=key)
        assert response.status_code == 409, response.content
        edge_views.GATE.set()  # the first request finishes now (in 0.0 s more)
        while response.status_code == 409 and len(answers) < 30:
            answers.append(int(response["Retry-After"]))
            time.sleep(int(response["Retry-After"]))  # real time: what a polite client does
            response = client.post(url, HTTP_IDEMPOTENCY_KEY=key)
        replayed_at = time.monotonic()
        thread.join(timeout=30)
    assert first["response"].status_code == 201
    assert response.status_code == 201
    assert response["Idempotent-Replayed"] == "true"
    assert response.content == first["response"].content
    assert answers[0] == 1  # not the 60 s of the lease
    assert replayed_at - first["done"] <= 2.0
    assert edge_views.RUNS[url] == 1
