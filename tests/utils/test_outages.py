"""Store outages over HTTP: 503 idempotency-store-unavailable, never an unclaimed run, never a
500 (functions, tokens, locks and tasks: ``test_outages_calls.py``).

Real failures only: a Redis port nothing listens on, a private Redis that is frozen
(SIGSTOP) or killed, a PostgreSQL session ended with ``pg_terminate_backend``, a MySQL one
with ``KILL``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings

from idempotency import signals
from idempotency.stores.base import get_store
from idempotency.stores.records import record_digest
from tests.support.clocks import age
from tests.support.counting import received
from tests.support.faults import (
    assert_unavailable,
    caches_with,
    dead_redis_store,
    dead_redis_url,
    private_redis,
)
from tests.support.http import post
from tests.support.scopes import FIXED_SCOPE
from tests.support.stores import DB_STORE, REDIS_STORE, using
from tests.support.storms import wait_until
from tests.testapp import views
from tests.testapp.models import Effect, Wallet

pytestmark = pytest.mark.django_db(transaction=True)

H = "HTTP_IDEMPOTENCY_KEY"


@pytest.fixture
def cache_failures() -> Iterator[list[dict[str, Any]]]:
    with received(signals.response_cache_failed) as seen:
        yield seen


def test_unreachable_redis_store_answers_503_and_never_runs_the_view(
    client_a: Client, wallet: Wallet, outages: list[dict[str, Any]]
) -> None:
    with dead_redis_store():
        response = post(client_a, "/t/lease-function/", key=str(uuid.uuid4()))
    assert_unavailable(response)
    assert Effect.objects.count() == 0
    assert [(o["backend"], o["operation"]) for o in outages] == [("redis", "claim")]


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        ("ClusterDownError", True),  # CLUSTERDOWN: a failover under way
        ("MasterDownError", True),
        ("TryAgainError", True),  # TRYAGAIN: a resharding under way
        ("SlotNotCoveredError", True),
        ("ClusterError", True),  # the client's redirections exhausted
        ("ReadOnlyError", True),
        ("BusyLoadingError", True),
        ("ResponseError", False),  # a refused command is not an outage: a bug surfaces
        ("DataError", False),
    ],
)
def test_a_redis_cluster_in_failover_is_an_outage_not_a_bug(error: str, outage: bool) -> None:
    """The failover storm met CLUSTERDOWN from a claim and answered a bare 500: every
    error by which Redis or redis-py says "not now" is an outage (503, Retry-After)."""
    from redis import exceptions

    from idempotency.utils.outages import is_outage

    assert is_outage(getattr(exceptions, error)("CLUSTERDOWN The cluster is down")) is outage


def test_fail_open_setting_runs_the_view_unprotected(client_a: Client, wallet: Wallet) -> None:
    with dead_redis_store(STORE_UNAVAILABLE="run"):
        response = post(client_a, "/t/lease-function/", key=str(uuid.uuid4()))
    assert response.status_code == 201
    assert Effect.objects.count() == 1


def test_fail_open_is_per_view(client_a: Client, wallet: Wallet) -> None:
    with dead_redis_store():  # the default, "reject", for every other view
        opted_out = post(client_a, "/t/fail-open/", key=str(uuid.uuid4()))
        default = post(client_a, "/t/lease-function/", key=str(uuid.uuid4()))
    assert opted_out.status_code == 201
    assert_unavailable(default)
    assert Effect.objects.count() == 1


def test_a_request_without_key_never_touches_the_store(client_a: Client, wallet: Wallet) -> None:
    with dead_redis_store():
        response = client_a.post(
            "/t/lease-function/", data='{"amount": 1}', content_type="application/json"
        )
    assert response.status_code == 201


class FreezeInTheView:
    """In ``tests.testapp.views.HOLD``'s place: a view called with ``?hold=before`` freezes
    the private Redis where it would stop, after its claim and before its work, and has it
    thawed ``outage`` seconds later (None: by the test). A timer started with the request
    froze it 0.3 s in, which a stalled process could reach before the claim (answered
    503) or after the completion (nothing failed)."""

    def __init__(self, server: Any, outage: float | None = None) -> None:
        self.server, self.outage = server, outage
        self.frozen = threading.Event()
        self.thawing: threading.Thread | None = None

    def stop(self) -> None:
        self.server.freeze()
        self.frozen.set()
        if self.outage is not None:
            self.thawing = threading.Thread(target=self._thaw_later)
            self.thawing.start()

    def _thaw_later(self) -> None:
        outage = self.outage or 0.0
        time.sleep(outage)  # real time: the outage's length, not a wait for another thread
        self.server.thaw()

    def join(self) -> None:
        if self.thawing is not None:
            self.thawing.join(30)


def test_store_lost_while_the_view_ran_and_back_within_the_lease_keeps_the_outcome(
    client_a: Client, wallet: Wallet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis freezes while the view runs and thaws 4 s later, well within the lease but
    longer than redis-py's own retries of one call (3 x 0.5 s timeouts): the engine retries
    the completion until it is stored, the view's 201 goes out, and a retry replays it (no
    second run)."""
    with (
        private_redis() as server,
        override_settings(
            CACHES=caches_with("private", server.url),
            IDEMPOTENCY=using(REDIS_STORE, cache="private"),
        ),
    ):
        key = str(uuid.uuid4())
        gate = FreezeInTheView(server, outage=4)
        monkeypatch.setattr(views, "HOLD", gate)
        try:
            first = post(client_a, "/t/lease-function/?sleep=1.0&hold=before", key=key)
        finally:
            gate.join()
            server.thaw()
        retry = post(client_a, "/t/lease-function/?sleep=1.0&hold=before", key=key)
    assert gate.frozen.is_set()
    assert first.status_code == 201
    assert retry.status_code == 201 and retry["Idempotent-Replayed"] == "true"
    assert Effect.objects.count() == 1


def test_store_lost_for_longer_than_the_lease_answers_what_the_view_did(
    client_a: Client,
    wallet: Wallet,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Redis freezes while the view runs and stays frozen past the lease: the completion is
    retried until the lease runs out, then the view's 201 goes out anyway (not a 5xx that
    invites a retry), and the log says the outcome was not stored."""
    with (
        private_redis() as server,
        override_settings(
            CACHES=caches_with("private", server.url),
            IDEMPOTENCY={**using(REDIS_STORE, cache="private"), "LEASE": 2},
        ),
    ):
        key = str(uuid.uuid4())
        gate = FreezeInTheView(server)
        monkeypatch.setattr(views, "HOLD", gate)
        try:
            with received(signals.store_unavailable) as outages:
                started = time.monotonic()
                first = post(client_a, "/t/lease-function/?sleep=1.0&hold=before", key=key)
                took = time.monotonic() - started
        finally:
            server.thaw()
    assert gate.frozen.is_set()
    assert first.status_code == 201
    assert Effect.objects.count() == 1
    # the completion was sent again and again, not given up after its first failure
    assert [o["operation"] for o in outages].count("complete") >= 2, outages
    assert took >= 1.0 + 2  # the view, then the completion retried for the whole lease
    assert "could not be stored" in caplog.text


@pytest.mark.postgres
def test_unreachable_database_store_answers_503(
    client_a: Client, wallet: Wallet, outages: list[dict[str, Any]]
) -> None:
    """The session of the store's connection is ended by the server (pg_terminate_backend)."""
    import psycopg

    with override_settings(IDEMPOTENCY={**using(DB_STORE), "MODE": "atomic", "SCOPE": FIXED_SCOPE}):
        connection.ensure_connection()
        pid = connection.connection.info.backend_pid
        settings_dict = connection.settings_dict
        with psycopg.connect(
            host=settings_dict["HOST"] or "127.0.0.1",
            port=settings_dict["PORT"] or 5432,
            user=settings_dict["USER"],
            dbname=settings_dict["NAME"],
            autocommit=True,
        ) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        try:
            # no session, a scope from no table: the store's lookup is the first query
            response = post(Client(), "/t/function/", key=str(uuid.uuid4()))
        finally:
            connection.close()
    assert_unavailable(response)
    assert Effect.objects.count() == 0
    assert [(o["backend"], o["operation"]) for o in outages] == [("database", "lookup")]


@pytest.mark.mysql
@pytest.mark.parametrize("mode", ["atomic", "lease"])
def test_killed_mysql_session_of_the_store_answers_503(
    client_a: Client, wallet: Wallet, outages: list[dict[str, Any]], mode: str
) -> None:
    """The store's session is ended by the server (``KILL``, as a failover or an
    administrator would): the request is a 503 problem, never a 500, and runs nothing."""
    from django.db import connections

    settings = {**using(DB_STORE), "MODE": mode, "SCOPE": FIXED_SCOPE}
    with override_settings(IDEMPOTENCY=settings):
        connection.ensure_connection()
        thread_id = connection.connection.thread_id()
        admin = connections.create_connection("default")
        try:
            with admin.cursor() as cursor:
                cursor.execute("KILL %s", [thread_id])
        finally:
            admin.close()
        try:
            response = post(Client(), "/t/function/", key=str(uuid.uuid4()))
        finally:
            connection.close()
    assert_unavailable(response)
    assert Effect.objects.count() == 0
    assert [(o["backend"], o["operation"]) for o in outages] == [("database", "lookup")]


@pytest.mark.parametrize("mode", ["atomic", "lease"])
def test_response_cache_down_falls_back_to_the_database(
    client_a: Client,
    wallet: Wallet,
    mode: str,
    cache_failures: list[dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        override_settings(
            CACHES=caches_with("private", dead_redis_url()),
            IDEMPOTENCY={**using(DB_STORE, response_cache="private"), "MODE": mode},
        ),
        caplog.at_level(logging.WARNING, logger="idempotency"),
    ):
        key = str(uuid.uuid4())
        first = post(client_a, "/t/function/", key=key)
        replay = post(client_a, "/t/function/", key=key)
        other = post(client_a, "/t/function/", key=str(uuid.uuid4()))
    assert first.status_code == other.status_code == replay.status_code == 201
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.content == first.content
    assert Effect.objects.count() == 2
    operations = {failure["operation"] for failure in cache_failures}
    assert operations == {"get", "set"}
    cache_lines = [r for r in caplog.records if "response cache failed" in r.getMessage()]
    assert len(cache_lines) == 1  # once per burst, not once per request


@pytest.mark.postgres
def test_response_cache_outage_under_load_loses_nothing(
    client_a: Client, wallet: Wallet, cache_failures: list[dict[str, Any]]
) -> None:
    """A real Redis as response cache is killed while threads send keyed requests and
    their retries, then comes back empty: every request is answered 201 (first or
    replay), and every key ran once."""
    with (
        private_redis() as server,
        override_settings(
            CACHES=caches_with("private", server.url),
            IDEMPOTENCY={**using(DB_STORE, response_cache="private"), "MODE": "atomic"},
        ),
    ):
        keys = [str(uuid.uuid4()) for _ in range(24)]
        statuses: list[int] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def worker(part: list[str]) -> None:
            try:
                for key in part:
                    for _attempt in range(3):
                        status = post(client_a, "/t/function/", key=key).status_code
                        with lock:
                            statuses.append(status)
                        # real time: the requests spread over a real server's outage
                        time.sleep(0.02)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=worker, args=(keys[i::4],)) for i in range(4)]
        for thread in threads:
            thread.start()
        assert wait_until(lambda: len(statuses) >= 8, timeout=60)  # requests are flowing
        server.kill()
        assert wait_until(lambda: cache_failures, timeout=60)  # the outage hit requests
        server.start()
        for thread in threads:
            thread.join(timeout=120)
    assert not errors
    assert len(statuses) == 72
    assert set(statuses) == {201}
    assert Effect.objects.count() == len(keys)
    assert cache_failures  # the outage did hit requests in flight


@pytest.mark.parametrize(
    "store_path",
    [
        DB_STORE,
        pytest.param(REDIS_STORE, marks=pytest.mark.redis),
        "idempotency.stores.cache.CacheStore",
    ],
)
def test_a_claim_knows_it_took_over_an_expired_lease(store_path: str) -> None:
    with override_settings(IDEMPOTENCY=using(store_path)):
        store = get_store()
        key = str(uuid.uuid4())
        first = store.claim("s", key, fingerprint="f", lease=0.2, ttl=60)
        age(store, "s", key, 1)
        second = store.claim("s", key, fingerprint="f", lease=30, ttl=60)
        fresh = store.claim("s", str(uuid.uuid4()), fingerprint="f", lease=30, ttl=60)
    assert first.owned and second.owned and fresh.owned
    assert not first.taken_over
    assert second.taken_over
    assert not fresh.taken_over
    assert second.fence != first.fence


def test_the_view_sees_a_stable_reference_of_its_key(client_a: Client, wallet: Wallet) -> None:
    key = str(uuid.uuid4())
    response = post(client_a, "/t/context/", key=key)
    body = json.loads(response.content)
    assert response.status_code == 201
    assert body["taken_over"] is False
    assert body["reference"].startswith("idem_")
    assert len(body["reference"]) == 45
    from idempotency.models import IdempotencyRecord

    record = IdempotencyRecord.objects.get(key=key)
    assert body["reference"] == f"idem_{record_digest(record.scope, key)}"
