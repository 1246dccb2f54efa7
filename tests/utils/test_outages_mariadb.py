"""MariaDB stopped and started again under ``DatabaseStore`` (issue 35, item 4: outages,
the server stopped): a ``mariadbd`` of the test's own (``tests.support.faults``), the
store's alias pointed at it, the server stopped between requests or under one, then
started again.

While it is down every keyed request answers a 503 problem (``Retry-After``), never a
500, and runs nothing; once it is back, completed keys replay and new keys run, and no
key ever ran twice. (A session killed by ``KILL`` is ``test_outages.py``'s.)
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import close_old_connections, connections
from django.test import Client, override_settings

from chaos.services import PrivateMariaDB
from idempotency import signals
from tests.support.faults import assert_unavailable, database_alias_at, private_mariadb
from tests.support.scopes import FIXED_SCOPE
from tests.support.stores import DB_STORE, using
from tests.testapp.models import Effect
from tests.testapp.views import Gate

ALIAS = "outage"  # tests/settings.py: a mirror of "default" until pointed at the server

pytestmark = [
    pytest.mark.mysql,
    pytest.mark.chaos,
    pytest.mark.django_db(transaction=True, databases=["default", ALIAS]),
]


def post(client: Client, key: str, query: str = "") -> Any:
    """One keyed request, in a server's request cycle: Django's handler closes a broken
    or expired connection before and after each request (``close_old_connections``), which
    the test client leaves out so that a test's transaction survives."""
    close_old_connections()
    try:
        return client.post(
            f"/t/function/{query}",
            data=json.dumps({"amount": 1, "label": key}),
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=key,
        )
    finally:
        close_old_connections()


def runs(key: str) -> int:
    """How often the view's effect for ``key`` committed (the test database's rows)."""
    return Effect.objects.filter(label=key).count()


@contextmanager
def store_on_private_mariadb(mode: str) -> Iterator[PrivateMariaDB]:
    """DatabaseStore on a private MariaDB; in atomic mode the view's own database
    ("default", where its effect is written) is in the transaction too
    (``ATOMIC_DATABASES``), as a deployment lists every alias a view writes to."""
    settings = {
        **using(DB_STORE, database=ALIAS),
        "MODE": mode,
        "ATOMIC_DATABASES": ["default"],
        "SCOPE": FIXED_SCOPE,
    }
    with (
        private_mariadb() as server,
        database_alias_at(ALIAS, server, "idem_outage"),
        override_settings(IDEMPOTENCY=settings),
    ):
        yield server


def in_threads(keys: list[str]) -> dict[str, int]:
    """Each key sent at once from a thread of its own: its status (500 for an exception)."""
    statuses: dict[str, int] = {}

    def send(key: str) -> None:
        try:
            statuses[key] = post(Client(raise_request_exception=False), key).status_code
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return statuses


@pytest.mark.parametrize("mode", ["atomic", "lease"])
def test_a_stopped_mariadb_answers_503_runs_nothing_and_recovers(mode: str) -> None:
    with store_on_private_mariadb(mode) as server:
        client = Client(raise_request_exception=False)
        done = f"done-{uuid.uuid4().hex}"
        first = post(client, done)
        assert first.status_code == 201, first.content

        server.stop()
        down = [post(client, done), post(client, f"down-{uuid.uuid4().hex}")]
        waiting = [f"load-{uuid.uuid4().hex}" for _ in range(4)]
        statuses = in_threads(waiting + waiting)  # each key twice, at once
        for response in down:
            assert_unavailable(response)  # 503 problem+json, Retry-After, never a 500
        assert set(statuses.values()) == {503}, statuses
        assert all(runs(key) == 0 for key in waiting)  # nothing ran unclaimed

        server.start()
        again = post(client, done)  # the completed key replays
        assert again.status_code == 201
        assert again["Idempotent-Replayed"] == "true"
        assert json.loads(again.content) == json.loads(first.content)
        assert set(in_threads(waiting).values()) <= {201, 409}  # what got 503 runs now
        for key in waiting:
            assert post(client, key).status_code == 201
            assert runs(key) == 1, key  # once
        assert runs(done) == 1


@pytest.mark.parametrize("mode", ["atomic", "lease"])
def test_mariadb_stopped_under_a_running_request(mode: str, gate: Gate) -> None:
    """The server stops while the view runs (its effect written, before the completion)
    and starts again once the store has failed: never a 500, and the key never runs
    twice. Lease mode keeps sending the completion while the lease lasts
    (``idempotency.core.engine``): the server back within it, the outcome is stored and
    a retry replays it."""
    with store_on_private_mariadb(mode) as server:
        key = f"inflight-{uuid.uuid4().hex}"
        answered: list[Any] = []
        failed = threading.Event()

        def unavailable(**kwargs: Any) -> None:
            failed.set()

        def send() -> None:
            try:
                answered.append(post(Client(raise_request_exception=False), key, "?hold=1"))
            finally:
                connections.close_all()

        thread = threading.Thread(target=send)
        signals.store_unavailable.connect(unavailable)
        try:
            thread.start()
            assert gate.entered.wait(30), "the view did not start"  # inside its transaction
            server.stop()
            gate.release.set()
            assert failed.wait(60), "the stopped server failed no store call"
            server.start()
            thread.join(timeout=90)
        finally:
            signals.store_unavailable.disconnect(unavailable)
        assert not thread.is_alive(), "the request did not end once the server was back"
        [response] = answered

        client = Client(raise_request_exception=False)
        retry = post(client, key, "?hold=1")  # the same request again
        assert runs(key) == 1  # never twice, whatever the first answer was
        assert response.status_code in {201, 503}, response.content  # never a 500
        if response.status_code == 503:
            assert_unavailable(response)
        if mode == "lease":
            # the view's effect committed, and its completion landed once the server was back
            assert response.status_code == 201, response.content
            assert retry.status_code == 201, retry.content
            assert retry["Idempotent-Replayed"] == "true"
            assert json.loads(retry.content) == json.loads(response.content)
        else:
            # atomic: rolled back with the claim (503), or committed (201); the retry
            # then runs it once, or replays it
            assert retry.status_code == 201, retry.content
