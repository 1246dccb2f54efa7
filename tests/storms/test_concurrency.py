"""Exactly once under real concurrency, on PostgreSQL: storms, crashes, takeovers.

Threads fire real concurrent duplicates through the whole stack (Django's
handler, DRF, the library, the store), each on its own database connection,
with committed transactions; the tests count the side effects.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from idempotency.stores.base import get_store
from tests.support import services
from tests.support.clocks import age
from tests.support.http import post
from tests.support.stores import STORE_VARIANTS, variant_params
from tests.support.storms import run_threads, storm
from tests.support.users import logged_in_client
from tests.testapp import views
from tests.testapp.models import Effect, Wallet
from tests.testapp.views import Gate

pytestmark = [pytest.mark.server_db, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("variant", variant_params())
@pytest.mark.parametrize("url", ["/t/api/", "/t/function/"])
def test_storm_of_duplicates_has_exactly_one_effect(
    user: Any, wallet: Wallet, variant: str, url: str
) -> None:
    key = str(uuid.uuid4())
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[variant]):
        responses = storm(lambda: logged_in_client(user), url + "?sleep=0.05", key, {"amount": 7})
    statuses = Counter(r.status_code for r in responses)
    first = [r for r in responses if r.status_code == 201 and "Idempotent-Replayed" not in r]
    replays = [r for r in responses if r.get("Idempotent-Replayed") == "true"]
    print(f"{variant} {url}: {dict(statuses)}")
    assert Effect.objects.count() == 1, statuses
    assert Wallet.objects.get().balance == 1000 - 7
    assert len(first) == 1
    assert all(r.content == first[0].content for r in replays)
    assert set(statuses) <= {201, 409}, statuses
    assert all(r["Retry-After"] for r in responses if r.status_code == 409)


def test_storm_of_different_keys_runs_each_once(user: Any, wallet: Wallet) -> None:
    n = 20

    def fire(i: int) -> int:
        return post(logged_in_client(user), "/t/api/", {"amount": 1}, f"k-{i}").status_code

    assert run_threads(n, fire) == [201] * n
    assert Effect.objects.count() == n
    assert Wallet.objects.get().balance == 1000 - n


CRASH_SCRIPT = """
import os, sys, django
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
django.setup()
from django.test import Client
from django.test.utils import override_settings
from rest_framework.authtoken.models import Token
from django.contrib.auth import get_user_model
user = get_user_model().objects.get(username="alice")
client = Client(HTTP_AUTHORIZATION="Token " + Token.objects.get(user=user).key)
client.force_login(user)
settings = {"MODE": sys.argv[3], "LEASE": 60}
with override_settings(ROOT_URLCONF="tests.urls", IDEMPOTENCY=settings):
    print("started", flush=True)
    client.post(sys.argv[1], data='{"amount": 3}', content_type="application/json",
                HTTP_IDEMPOTENCY_KEY=sys.argv[2])
"""


def _view_is_midway(mode: str, key: str) -> bool:
    from idempotency.models import IdempotencyRecord

    if mode == "lease":
        return IdempotencyRecord.objects.filter(key=key, state="in_progress").exists()
    with connection.cursor() as cursor:  # the worker sits inside its open transaction
        if connection.vendor == "mysql":  # a transaction that wrote, of a session on our db
            return services.mysql_transactions("t.trx_rows_modified > 0") > 0
        cursor.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "WHERE c.relname = 'testapp_wallet' AND l.mode = 'RowExclusiveLock' "
            "AND l.pid <> pg_backend_pid()"
        )
        return bool(cursor.fetchone()[0])


def _crash_midway(url: str, key: str, mode: str) -> None:
    """A worker process runs the view (``?hold=1``: it never leaves it) and is SIGKILLed
    there; returns once the server has ended its session (its locks are gone)."""
    env = {**os.environ, "DATABASE_URL": services.tests_database_url()}
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASH_SCRIPT, url, key, mode],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 30
    while not _view_is_midway(mode, key):
        assert time.monotonic() < deadline, "the worker never got inside the view"
        time.sleep(0.2)  # real time: InnoDB refreshes INNODB_TRX only when unread for 0.1 s
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 30
    while mode == "atomic" and _view_is_midway(mode, key):  # until the server rolls back
        assert time.monotonic() < deadline, "the server never ended the killed session"
        time.sleep(0.2)  # real time: InnoDB refreshes INNODB_TRX only when unread for 0.1 s


def test_atomic_mode_crash_leaves_no_record_and_no_effect(
    user: Any, wallet: Wallet, gate: Gate
) -> None:
    key = str(uuid.uuid4())
    _crash_midway("/t/api/?hold=1", key, "atomic")
    assert Effect.objects.count() == 0
    assert Wallet.objects.get().balance == 1000
    from idempotency.models import IdempotencyRecord

    assert not IdempotencyRecord.objects.filter(key=key).exists()
    gate.release.set()  # this process's retry runs its body through
    with override_settings(IDEMPOTENCY={"MODE": "atomic"}):
        retry = logged_in_client(user).post(
            "/t/api/?hold=1",
            data='{"amount": 3}',
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=key,
        )
    assert retry.status_code == 201
    assert Effect.objects.count() == 1


def test_lease_mode_dead_owner_blocks_until_lease_ends_then_retry_takes_over(
    user: Any, wallet: Wallet, gate: Gate, age_records: Callable[[str, float], None]
) -> None:
    key = str(uuid.uuid4())
    # the slow one stops before its writes: holding the wallet's row lock, it would make
    # the retry's write wait for it, and the test for the gate's 30-second timeout
    url = "/t/lease-function/?hold=before"
    _crash_midway(url, key, "lease")  # its lease: 60 s
    client = logged_in_client(user)
    gate.release.set()
    with override_settings(IDEMPOTENCY={"MODE": "lease"}):
        blocked = client.post(
            url, data='{"amount": 3}', content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
        )
        assert blocked.status_code == 409
        age_records(key, 61)  # the dead owner's lease runs out
        retry = client.post(
            url, data='{"amount": 3}', content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
        )
    assert retry.status_code == 201
    # lease mode cannot undo what the dead owner committed before dying: that is what
    # recovery points are for; the retry ran once, and replays from now on
    from idempotency.models import IdempotencyRecord

    record = IdempotencyRecord.objects.get(key=key)
    assert record.state == "completed"
    with override_settings(IDEMPOTENCY={"MODE": "lease"}):
        again = client.post(
            url, data='{"amount": 3}', content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
        )
    assert again["Idempotent-Replayed"] == "true"


@pytest.mark.parametrize(
    "variant", ["db-lease", pytest.param("redis", marks=pytest.mark.redis), "cache"]
)
def test_stale_owner_completion_is_fenced_off_over_http(
    user: Any, wallet: Wallet, variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow first request outlives its lease (its keep-alive cannot renew it: a store
    without one, or an owner paused past its lease); a retry takes over; the slow one's
    late completion must not overwrite the retry's stored response. The slow one is held
    inside its body and its lease aged past its end: no sleep decides who runs when."""
    key = str(uuid.uuid4())
    # the slow one stops before its writes: holding the wallet's row lock, it would make
    # the retry's write wait for it, and the test for the gate's 30-second timeout
    url = "/t/lease-function/?hold=before"
    client = logged_in_client(user)
    results: dict[str, Any] = {}
    gate = views.Gate(holds=1)  # the slow first request stops; the retry runs through
    monkeypatch.setattr(views, "HOLD", gate)

    def no_keepalive(scope: str, key: str, *, fence: int, lease: float) -> bool:
        raise NotImplementedError

    with override_settings(IDEMPOTENCY={**STORE_VARIANTS[variant], "LEASE": 0.5}):
        store = get_store()  # the configured store, its keep-alive taken away
        monkeypatch.setattr(store, "extend", no_keepalive)

        def slow() -> None:
            try:
                results["slow"] = post(logged_in_client(user), url, {"amount": 3}, key)
            finally:
                connection.close()

        thread = threading.Thread(target=slow)
        thread.start()
        try:
            assert gate.entered.wait(30)  # the slow request has claimed and runs its body
            age(store, f"auth.user:{user.pk}", key, 1)  # its lease is over, it still runs
            results["retry"] = post(client, url, {"amount": 3}, key)
        finally:
            gate.release.set()
            thread.join(30)
        replay = post(client, url, {"amount": 3}, key)
    assert results["slow"].status_code == 201
    assert results["retry"].status_code == 201
    assert "Idempotent-Replayed" not in results["retry"]
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.content == results["retry"].content
    assert replay.content != results["slow"].content


def test_lock_timeout_bounds_a_duplicates_wait_with_a_409(
    user: Any, wallet: Wallet, gate: Gate
) -> None:
    """Atomic mode with LOCK_TIMEOUT: a duplicate arriving while the first holds its locks
    answers 409 with Retry-After after the bound instead of waiting the first out."""
    key = str(uuid.uuid4())
    body = '{"amount": 4}'
    url = "/t/api/?hold=1"
    results: dict[str, Any] = {}
    with override_settings(IDEMPOTENCY={"MODE": "atomic", "LOCK_TIMEOUT": 0.3}):

        def first() -> None:
            try:
                results["first"] = logged_in_client(user).post(
                    url, data=body, content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
                )
            finally:
                connection.close()

        thread = threading.Thread(target=first)
        thread.start()
        assert gate.entered.wait(30)  # the first holds its claim and the wallet row
        duplicate = logged_in_client(user).post(
            url, data=body, content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
        )
        first_still_running = not gate.release.is_set() and thread.is_alive()
        gate.release.set()
        thread.join(30)
        replay = logged_in_client(user).post(
            url, data=body, content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
        )
    assert duplicate.status_code == 409
    assert duplicate["Retry-After"]
    assert first_still_running  # bounded by the lock timeout, not by the first request
    assert results["first"].status_code == 201
    assert replay["Idempotent-Replayed"] == "true"
    assert Effect.objects.count() == 1
