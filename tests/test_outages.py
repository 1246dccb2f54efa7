"""Store outages: 503 idempotency-store-unavailable, never an unclaimed run, never a 500.

Real failures only: a Redis port nothing listens on, a private Redis that is frozen
(SIGSTOP) or killed, a PostgreSQL session ended with ``pg_terminate_backend``.
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
from idempotency.exceptions import StoreUnavailable
from idempotency.stores import get_store, record_digest
from tests.support.clocks import age
from tests.support.faults import caches_with, dead_redis_url, private_redis
from tests.support.storms import wait_until
from tests.testapp.models import Effect, Wallet

pytestmark = pytest.mark.django_db(transaction=True)

H = "HTTP_IDEMPOTENCY_KEY"
REDIS_STORE = "idempotency.stores.RedisStore"
DB_STORE = "idempotency.stores.DatabaseStore"


FIXED = "tests.test_outages.fixed_scope"


def fixed_scope(request: Any) -> str:
    return "caller:fixed"


def post(client: Client, url: str, key: str, **extra: Any) -> Any:
    return client.post(
        url, data=json.dumps({"amount": 5}), content_type="application/json", **{H: key, **extra}
    )


@pytest.fixture
def outages() -> Iterator[list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    def receive(**kwargs: Any) -> None:
        seen.append(kwargs)

    signals.store_unavailable.connect(receive)
    yield seen
    signals.store_unavailable.disconnect(receive)


@pytest.fixture
def cache_failures() -> Iterator[list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    def receive(**kwargs: Any) -> None:
        seen.append(kwargs)

    signals.response_cache_failed.connect(receive)
    yield seen
    signals.response_cache_failed.disconnect(receive)


def dead_redis_store(**extra: Any) -> Any:
    return override_settings(
        CACHES=caches_with("private", dead_redis_url()),
        IDEMPOTENCY={"STORE": REDIS_STORE, "REDIS_ALIAS": "private", **extra},
    )


def assert_unavailable(response: Any) -> None:
    assert response.status_code == 503
    assert response["Content-Type"] == "application/problem+json"
    assert int(response["Retry-After"]) >= 1
    assert json.loads(response.content)["code"] == "idempotency-store-unavailable"


def test_unreachable_redis_store_answers_503_and_never_runs_the_view(
    client_a: Client, wallet: Wallet, outages: list[dict[str, Any]]
) -> None:
    with dead_redis_store():
        response = post(client_a, "/t/lease-function/", str(uuid.uuid4()))
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

    from idempotency.outages import is_outage

    assert is_outage(getattr(exceptions, error)("CLUSTERDOWN The cluster is down")) is outage


def test_fail_open_setting_runs_the_view_unprotected(client_a: Client, wallet: Wallet) -> None:
    with dead_redis_store(STORE_UNAVAILABLE="run"):
        response = post(client_a, "/t/lease-function/", str(uuid.uuid4()))
    assert response.status_code == 201
    assert Effect.objects.count() == 1


def test_fail_open_is_per_view(client_a: Client, wallet: Wallet) -> None:
    with dead_redis_store():  # the default, "reject", for every other view
        opted_out = post(client_a, "/t/fail-open/", str(uuid.uuid4()))
        default = post(client_a, "/t/lease-function/", str(uuid.uuid4()))
    assert opted_out.status_code == 201
    assert_unavailable(default)
    assert Effect.objects.count() == 1


def test_a_request_without_key_never_touches_the_store(client_a: Client, wallet: Wallet) -> None:
    with dead_redis_store():
        response = client_a.post(
            "/t/lease-function/", data='{"amount": 1}', content_type="application/json"
        )
    assert response.status_code == 201


def test_store_lost_after_the_view_ran_answers_what_the_view_did(
    client_a: Client, wallet: Wallet
) -> None:
    """Redis freezes while the view runs: the view's 201 goes out (not a 5xx that invites a
    retry); the claim stays in progress, so a prompt retry is a 409, not a second run."""
    with (
        private_redis() as server,
        override_settings(
            CACHES=caches_with("private", server.url),
            IDEMPOTENCY={"STORE": REDIS_STORE, "REDIS_ALIAS": "private"},
        ),
    ):
        key = str(uuid.uuid4())
        timer = threading.Timer(0.3, server.freeze)
        timer.start()
        try:
            first = post(client_a, "/t/lease-function/?sleep=1.0", key)
        finally:
            timer.join()
            server.thaw()
        retry = post(client_a, "/t/lease-function/?sleep=1.0", key)
    assert first.status_code == 201
    assert retry.status_code == 409
    assert Effect.objects.count() == 1


@pytest.mark.postgres
def test_unreachable_database_store_answers_503(
    client_a: Client, wallet: Wallet, outages: list[dict[str, Any]]
) -> None:
    """The session of the store's connection is ended by the server (pg_terminate_backend)."""
    import psycopg

    with override_settings(IDEMPOTENCY={"STORE": DB_STORE, "MODE": "atomic", "SCOPE": FIXED}):
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
            response = post(Client(), "/t/function/", str(uuid.uuid4()))
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
            IDEMPOTENCY={"STORE": DB_STORE, "MODE": mode, "RESPONSE_CACHE": "private"},
        ),
        caplog.at_level(logging.WARNING, logger="idempotency"),
    ):
        key = str(uuid.uuid4())
        first = post(client_a, "/t/function/", key)
        replay = post(client_a, "/t/function/", key)
        other = post(client_a, "/t/function/", str(uuid.uuid4()))
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
            IDEMPOTENCY={"STORE": DB_STORE, "MODE": "atomic", "RESPONSE_CACHE": "private"},
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
                        status = post(client_a, "/t/function/", key).status_code
                        with lock:
                            statuses.append(status)
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
        "idempotency.stores.CacheStore",
    ],
)
def test_a_claim_knows_it_took_over_an_expired_lease(store_path: str) -> None:
    with override_settings(IDEMPOTENCY={"STORE": store_path}):
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
    response = post(client_a, "/t/context/", key)
    body = json.loads(response.content)
    assert response.status_code == 201
    assert body["taken_over"] is False
    assert body["reference"].startswith("idem_")
    assert len(body["reference"]) == 45
    from idempotency.models import IdempotencyRecord

    record = IdempotencyRecord.objects.get(key=key)
    assert body["reference"] == f"idem_{record_digest(record.scope, key)}"


def test_functions_tokens_and_locks_raise_store_unavailable(
    outages: list[dict[str, Any]],
) -> None:
    from idempotency import idempotent_function, issue_submit_token, lock

    runs: list[int] = []

    @idempotent_function(key="fn:{n}", store=REDIS_STORE)
    def work(n: int) -> int:
        runs.append(n)
        return n

    with dead_redis_store(SUBMIT_TOKEN_BACKEND="redis", LOCK_BACKEND="redis"):
        with pytest.raises(StoreUnavailable):
            work(1)
        with pytest.raises(StoreUnavailable):
            issue_submit_token(user_or_scope="user:1", purpose="form")
        with pytest.raises(StoreUnavailable), lock("nightly", timeout=5):
            pass
    assert runs == []
    assert {o["operation"] for o in outages} == {"claim", "issue", "try_acquire"}


def test_require_submit_token_answers_503(rf: Any) -> None:
    from django.http import HttpResponse

    from idempotency import require_submit_token

    @require_submit_token("form", scope=lambda request: "user:1")
    def view(request: Any) -> HttpResponse:
        return HttpResponse("ran")

    with dead_redis_store(SUBMIT_TOKEN_BACKEND="redis"):
        response = view(rf.post("/", HTTP_X_SUBMIT_TOKEN="abc"))
    assert_unavailable(response)


def test_an_eager_task_raises_store_unavailable() -> None:
    from idempotency import idempotent_task

    runs: list[str] = []

    @idempotent_task(key="t:{name}", store=REDIS_STORE)
    def job(name: str) -> str:
        runs.append(name)
        return name

    with dead_redis_store(), pytest.raises(StoreUnavailable):
        job("a")  # called directly: no broker to retry through, the caller sees it
    assert runs == []


@pytest.mark.redis
def test_a_delivered_task_is_retried_later_when_the_store_is_unreachable() -> None:
    """A worker's delivery (not eager): the body does not run and Celery schedules a retry,
    published to the real test broker on a queue of this test's own."""
    from celery import Celery
    from celery.exceptions import Retry

    from idempotency import IdempotentTask
    from tests.support.services import BROKER_URL, broker_redis

    broker_redis()  # skips (or fails, where services are required) without the broker
    app = Celery("outage-retry", broker=BROKER_URL, set_as_current=False)
    app.conf.update(task_always_eager=False, result_backend=None)
    queue = f"idem-outage-{uuid.uuid4().hex[:8]}"
    runs: list[str] = []

    @app.task(
        base=IdempotentTask,
        name="outage.job",
        idempotency_key="job:{name}",
        idempotency_store=REDIS_STORE,
        queue=queue,
        max_retries=3,
    )
    def job(name: str) -> str:
        runs.append(name)
        return name

    task: Any = job
    task.push_request(
        id=str(uuid.uuid4()),
        args=["a"],
        kwargs={},
        retries=0,
        is_eager=False,
        called_directly=False,
    )
    try:
        with dead_redis_store(), pytest.raises(Retry) as retried:
            task("a")
    finally:
        task.pop_request()
        broker_redis().delete(queue)
    assert runs == []
    assert isinstance(retried.value.exc, StoreUnavailable)
    assert retried.value.when is not None and float(retried.value.when) >= 0.5
