"""One meaning for every option (issue 38, item 2): an option not given means the
``IDEMPOTENCY`` setting of the same name, on views, functions and tasks alike. Each test
sets one setting and observes it on all three, through what the work itself sees (its
transaction, its record) or what its caller gets."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import Client, override_settings
from django.urls import path

from idempotency import idempotent, idempotent_function
from idempotency.contrib.celery import idempotent_task
from idempotency.exceptions import CallInProgress
from idempotency.models import IdempotencyRecord
from tests.support.http import new_key
from tests.support.stores import using
from tests.support.storms import wait_until
from tests.testapp.celery_app import app

DB_STORE = "idempotency.stores.database.DatabaseStore"
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

#: What the work saw, by key: whether it ran in a transaction, the record's lease and
#: the runs so far.
seen: dict[str, dict[str, Any]] = {}
#: Set while a test holds a run in its work (the wait test).
holding: dict[str, threading.Event] = {}


def observe(key: str, *, fail: bool = False) -> int:
    """The work of every interface: note what it sees, count the run, maybe raise."""
    entry = seen.setdefault(key, {"runs": 0})
    entry["runs"] += 1
    entry["in_transaction"] = connection.in_atomic_block
    record = IdempotencyRecord.objects.filter(key=key).first()
    if record is not None and record.lease_expires_at is not None:
        entry["lease"] = (record.lease_expires_at - record.created_at).total_seconds()
    gate = holding.get(key)
    if gate is not None:
        assert gate.wait(30)
    if fail:
        raise ValueError(f"the work of {key} failed")
    return int(entry["runs"])


@idempotent
def view(request: HttpRequest) -> HttpResponse:
    key = request.headers["Idempotency-Key"]
    runs = observe(key, fail=bool(request.GET.get("fail")))
    return JsonResponse({"runs": runs}, status=201)


urlpatterns = [path("options/", view)]


@idempotent_function(key="{key}")
def function(key: str, fail: bool = False) -> int:
    return observe(key, fail=fail)


@idempotent_task(app=app, name="options.task", key="{key}")
def task(key: str, fail: bool = False) -> int:
    return observe(key, fail=fail)


def call_view(client: Client, key: str, *, fail: bool = False) -> Any:
    url = "/options/?fail=1" if fail else "/options/"
    return client.post(url, {}, content_type="application/json", HTTP_IDEMPOTENCY_KEY=key)


def call_function(_client: Client, key: str, *, fail: bool = False) -> Any:
    return function(key, fail)


def call_task(_client: Client, key: str, *, fail: bool = False) -> Any:
    return task.apply((key, fail), throw=True).get()


INTERFACES: dict[str, Callable[..., Any]] = {
    "view": call_view,
    "function": call_function,
    "task": call_task,
}


@pytest.fixture(params=list(INTERFACES))
def interface(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(f"options-{uuid.uuid4().hex[:8]}")


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def client(user: Any) -> Client:
    return logged_in(user)


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    seen.clear()
    holding.clear()
    yield
    for gate in holding.values():
        gate.set()


def settings(**options: Any) -> Any:
    return override_settings(IDEMPOTENCY={**using(DB_STORE), **options})


@pytest.mark.parametrize("mode", ["atomic", "lease"])
def test_mode_comes_from_the_setting(interface: str, client: Client, mode: str) -> None:
    key = new_key()
    with settings(MODE=mode):
        INTERFACES[interface](client, key)
    # atomic mode runs the work in the record's transaction; lease mode commits the
    # claim first and runs the work outside any transaction
    assert seen[key]["in_transaction"] is (mode == "atomic")


@pytest.mark.parametrize("store_errors", [True, False])
def test_store_errors_comes_from_the_setting(
    interface: str, client: Client, store_errors: bool
) -> None:
    key = new_key()
    call = INTERFACES[interface]
    with settings(STORE_ERRORS=store_errors, MODE="lease"):
        for _attempt in range(2):
            try:
                answer = call(client, key, fail=True)
            except ValueError:
                continue
            assert interface == "view" and answer.status_code == 500
    # stored, the error is replayed and the work ran once; released, it ran again
    assert seen[key]["runs"] == (1 if store_errors else 2)


def test_lease_and_ttl_come_from_the_settings(interface: str, client: Client) -> None:
    key = new_key()
    with settings(MODE="lease", LEASE=1234, TTL=4321):
        INTERFACES[interface](client, key)
    assert seen[key]["lease"] == pytest.approx(1234, abs=5)
    record = IdempotencyRecord.objects.get(key=key)
    assert (record.expires_at - record.created_at).total_seconds() == pytest.approx(4321, abs=5)


def test_wait_comes_from_the_setting(interface: str, client: Client, user: Any) -> None:
    key = new_key()
    call = INTERFACES[interface]
    holding[key] = threading.Event()
    with settings(MODE="lease", WAIT=1.0):
        first = threading.Thread(target=call, args=(client, key))
        first.start()
        try:
            # the first run holds the key
            assert wait_until(lambda: seen.get(key, {}).get("runs") == 1, timeout=30, interval=0.01)
            started = time.monotonic()
            try:
                answer = call(logged_in(user), key)
            except CallInProgress:
                answer = None
            waited = time.monotonic() - started
        finally:
            holding[key].set()
            first.join(30)
    # the duplicate waited the setting's second for the first run before it gave up
    assert waited >= 0.9
    if interface == "view":
        assert answer.status_code == 409
    assert seen[key]["runs"] == 1
