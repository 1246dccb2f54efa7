"""Keep-alive (issue 19, item 9): a live owner keeps its lease while its body runs; a
dead one loses it one lease period later; a keep-alive that cannot reach the store never
makes the body run twice. Executions are counted in memory or in the owner process's
marker file: nothing a rollback could undo.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from idempotency import CallInProgress, StoreUnavailable, idempotent_function
from idempotency.contrib.celery import idempotent_task
from idempotency.stores.base import BaseStore, StoredResponse, get_store
from tests.support import keepalive_owner, services
from tests.support.clocks import age
from tests.support.counting import Counter, unique
from tests.support.faults import caches_with, private_redis
from tests.support.services import ROOT, redis_url
from tests.support.stores import ALL_STORES, DB_STORE, store_of, store_params
from tests.support.storms import run_threads, wait_until
from tests.support.tasks import inprocess_app

# the storms on the database store need PostgreSQL: SQLite's shared-cache test database
# answers concurrent writers with "database table is locked" instead of waiting
STORM_STORES = [
    pytest.param(store_of(DB_STORE), id="db", marks=[pytest.mark.server_db]),
    *store_params("redis", "cache"),
]
#: The storms' lease, renewed every third of it. A body one and a half leases long ends
#: after the first lease has run out: it is answered once only if renewals kept the key
#: (a renewal at a third of the lease alone would not reach the body's end; a later one
#: must). The lease is long so a renewal may run four seconds late before it runs out: a
#: loaded CI machine (2 cores, five streams) stalled this process for more than the two
#: seconds a 3 s lease allowed, the waiting retries took the key over before the late
#: renewal ran, and the body ran twice, as lease mode allows once a lease has run out.
LEASE = 6.0
#: The bodies' length: past the first lease, so only renewals keep the key. The storms run
#: in lease mode on every store (the database store's default for a function is atomic,
#: whose row lock would keep the key with no renewal at all).
BODY = 1.5 * LEASE

app = inprocess_app("beyond-keepalive")


def until_answered(call: Any, *, timeout: float = 30.0) -> Any:
    """Retry ``call`` as a client would while the first is in progress."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except CallInProgress:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # real time: a client's retry interval while a real body runs


# -- the store contract ------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("store", ALL_STORES)
def test_extend_is_fenced(store: str) -> None:
    backend = get_store(store)
    key = unique("k")
    # a lease no stall of the test process outlasts before the renewal (0.2 s could)
    owner = backend.claim("s", key, fingerprint="f", lease=5, ttl=60)
    assert owner.owned
    assert backend.extend("s", key, fence=owner.fence, lease=30)
    assert not backend.extend("s", key, fence=owner.fence + 1, lease=30)  # a stale fence
    age(backend, "s", key, 6)  # the first lease has passed: only the renewal keeps the key
    assert backend.claim("s", key, fingerprint="f", lease=5, ttl=60).status.value == "in_progress"
    response = StoredResponse(200, [], b"done")
    assert backend.complete("s", key, fence=owner.fence, response=response, ttl=60)
    assert not backend.extend("s", key, fence=owner.fence, lease=30)  # completed
    other = backend.claim("s", unique("k2"), fingerprint="f", lease=5, ttl=60)
    assert not backend.extend("s", unique("never-claimed"), fence=other.fence, lease=30)


# -- a body longer than its lease, ten concurrent retries --------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", STORM_STORES)
def test_a_long_function_body_runs_once_under_ten_concurrent_retries(store: str) -> None:
    runs = Counter()

    @idempotent_function(key="long:{ref}", store=store, mode="lease", lease=LEASE, wait=0)
    def long_body(ref: str) -> dict[str, int]:
        run = runs()
        # past the first lease: without renewals it would run again
        time.sleep(BODY)  # real time: the store's server times the lease
        return {"run": run}

    ref = unique("ref")
    results = run_threads(10, lambda _i: until_answered(lambda: long_body(ref)))
    assert results == [{"run": 1}] * 10, results
    assert runs.count == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", STORM_STORES)
def test_a_long_task_runs_once_under_ten_concurrent_deliveries(store: str) -> None:
    runs = Counter()

    @idempotent_task(
        app=app, name=f"keepalive.long.{store}", mode="lease", lease=LEASE, store=store
    )
    def long_task(ref: str) -> dict[str, int]:
        run = runs()
        # past the first lease: without renewals it would run again
        time.sleep(BODY)  # real time: the store's server times the lease
        return {"run": run}

    task_id = str(uuid.uuid4())
    # Define the task here, once: Celery creates an app's task lazily on first use, and
    # ten threads using it first at once can get it before it is bound (its request
    # stack still None: "'NoneType' object has no attribute 'push'"). A worker binds
    # its tasks when it starts; the storm is about deliveries, not about that.
    assert long_task.name == f"keepalive.long.{store}"

    def deliver(_index: int) -> Any:
        # eager deliveries of one message: a duplicate raises CallInProgress, as a worker defers
        # (an eager result never blocks: no join check, whose flag other threads' apply sets)
        return until_answered(
            lambda: long_task.apply(("r",), task_id=task_id, throw=True).get(
                disable_sync_subtasks=False
            )
        )

    results = run_threads(10, deliver)
    assert results == [{"run": 1}] * 10, results
    assert runs.count == 1


# -- a SIGKILLed owner loses its key one lease period after its last renewal ------------


def _owner_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": services.tests_database_url(),
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        }
    )
    return env


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "store",
    [pytest.param("db", id="db"), pytest.param("redis", id="redis", marks=pytest.mark.redis)],
)
def test_a_sigkilled_owner_is_taken_over_after_one_lease_period(store: str, tmp_path: Path) -> None:
    lease = keepalive_owner.LEASE
    ref = unique("owned")
    marker = tmp_path / "started"
    owner = subprocess.Popen(
        [sys.executable, "-m", "tests.support.keepalive_owner", store, ref, str(marker)],
        cwd=ROOT,
        env=_owner_env(),
        start_new_session=True,
    )
    try:
        assert wait_until(marker.exists, timeout=60), "the owner never started its body"
        body = keepalive_owner.BODIES[store]
        # alive past its first lease: every retry meets the running owner, kept by renewals
        alive_until = time.monotonic() + 1.25 * lease
        while time.monotonic() < alive_until:
            with pytest.raises(CallInProgress):
                body(ref, 0.0)
            time.sleep(0.2)  # real time: the retry pace over lease periods the store's server times
        os.killpg(owner.pid, signal.SIGKILL)
        killed = time.monotonic()
        owner.wait(10)
        result = until_answered(lambda: body(ref, 0.0), timeout=5 * lease)
        taken_over = time.monotonic() - killed
    finally:
        if owner.poll() is None:
            os.killpg(owner.pid, signal.SIGKILL)
            owner.wait(10)
    assert result == {"ran_in": str(os.getpid())}  # the retry ran it, in this process
    # the last renewal was a third of a lease before the kill (on time): two thirds of it
    # were left. Held past the death, then freed by the lease: the bounds leave the owner's
    # renewals two seconds to have run late, and this process three to have stalled.
    print(f"[keep-alive] {store}: lease {lease} s, taken over {taken_over:.2f} s after SIGKILL")
    assert lease * 2 / 3 - 2.0 <= taken_over <= lease + 3.0, taken_over


# -- the keep-alive's own failure never runs the body twice ------------------------------


@pytest.mark.redis
@pytest.mark.django_db
def test_a_keepalive_that_cannot_reach_the_store_never_runs_the_body_twice(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from idempotency.stores.redis import RedisStore

    assert redis_url()
    runs = Counter()
    lease = 6.0  # renewals every 2 s; the outage stays well inside one lease
    with private_redis() as server, override_settings(CACHES=caches_with("private", server.url)):
        store = RedisStore(cache="private")
        started, renewed, thawed = threading.Event(), threading.Event(), threading.Event()
        extend = store.extend

        def noted_extend(*args: Any, **kwargs: Any) -> bool:
            extended = extend(*args, **kwargs)
            if extended:
                renewed.set()
            return extended

        monkeypatch.setattr(store, "extend", noted_extend)

        @idempotent_function(key="outage:{ref}", store=store, lease=lease, wait=0)
        def body(ref: str) -> dict[str, int]:
            run = runs()
            started.set()
            assert thawed.wait(30)  # the body outlives the outage
            return {"run": run}

        ref = unique("ref")
        first: list[Any] = []
        owner = threading.Thread(target=lambda: first.append(body(ref)))
        owner.start()
        assert started.wait(30)
        assert renewed.wait(30)  # one renewal went through
        server.freeze()  # unreachable for everyone: the keep-alive and every retry
        try:
            # until a renewal has failed (the next one falls due a third of a lease after
            # the last, and times out in half a second), and never past half the lease
            # the last renewal gave: ended by the clock alone, the outage could end just
            # before that renewal timed out, and nothing would have failed
            outage_ends = time.monotonic() + lease / 2
            while time.monotonic() < outage_ends and not failed_renewal(caplog):
                with pytest.raises(StoreUnavailable):
                    body(ref)
        finally:
            server.thaw()
            thawed.set()
        answered = until_answered(lambda: body(ref), timeout=30)
        owner.join(30)
    assert first == [answered] == [{"run": 1}]
    assert runs.count == 1
    assert failed_renewal(caplog)


def failed_renewal(caplog: pytest.LogCaptureFixture) -> bool:
    return "could not renew its lease" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_the_keepalive_stops_when_the_body_ends_and_is_not_needed_in_a_transaction() -> None:
    from django.db import transaction

    from idempotency.core.keepalive import watchdog

    before = watchdog().live
    seen: list[int] = []

    @idempotent_function(key="short:{ref}", store=store_of(DB_STORE), lease=0.3, mode="lease")
    def short(ref: str) -> str:
        seen.append(watchdog().live - before)
        return "ok"

    assert short(unique("ref")) == "ok"
    assert watchdog().live == before
    with transaction.atomic():
        # the claim is part of this transaction, invisible to others until the commit:
        # nothing can take it over, and another connection could not renew it
        assert short(unique("ref")) == "ok"
    assert seen == [1, 0]


def test_one_watchdog_thread_serves_every_keepalive() -> None:
    """Starting a keep-alive starts no thread of its own: bodies that end before their
    first renewal cost an entry in the schedule, and every renewal runs on the watchdog's
    pool."""
    from idempotency.core.keepalive import RENEWAL_THREADS, THREAD_NAME, KeepAlive

    class Renewable(BaseStore):
        renewed: list[str] = []

        def extend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
            self.renewed.append(key)
            return True

    def ours() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)}

    store = Renewable()
    before = ours()
    short = [KeepAlive(store, "s", f"k{i}", fence=1, lease=30, owner="t") for i in range(50)]
    for keeper in short:
        keeper.start()
    long = KeepAlive(store, "s", "long", fence=1, lease=0.06, owner="t").start()
    started = ours() - before  # the watchdog itself, the first time one is needed
    for keeper in short:
        keeper.stop()
    assert wait_until(lambda: long.renewals >= 3, timeout=10)
    long.stop()
    renewals = long.renewals
    assert long.renew(time.monotonic()) is None  # stopped: a renewal falling due now does nothing
    assert long.renewals == renewals
    assert set(store.renewed) == {"long"}
    # 51 keep-alives started no thread of their own; the renewals ran on the pool
    assert len(started) <= 1
    assert len(ours()) <= 1 + RENEWAL_THREADS
