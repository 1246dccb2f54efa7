"""The purge without Celery (issue 36, finding 6): database records expire even where
no beat runs, one bounded batch on the request path every PURGE_EVERY completions."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from django.core import checks
from django.db import connections, transaction
from django.test import Client, override_settings

from idempotency import idempotent_function
from idempotency.checks import check_settings
from idempotency.models import IdempotencyRecord
from tests.support.http import post
from tests.support.records import bulk
from tests.support.services import on_postgres
from tests.support.stores import DB_STORE, REDIS_STORE, store_of, using

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls("tests.urls")]


def expired_left() -> int:
    return IdempotencyRecord.objects.filter(key__startswith="old-").count()


# fmt: skip


@pytest.mark.parametrize("mode", ["atomic", "lease"])
def test_expired_records_go_without_a_beat_one_bounded_batch_at_a_time(
    mode: str, client_a: Client, wallet: Any
) -> None:
    """Before: expired rows stayed until a Celery beat ran the purge; with none, forever."""
    bulk(10, expired=True, prefix="old")
    settings = {**using(DB_STORE), "MODE": mode, "PURGE_EVERY": 3, "PURGE_EVERY_BATCH": 4}
    with override_settings(IDEMPOTENCY=settings):
        for _ in range(2):
            assert post(client_a, "/t/function/", key=str(uuid.uuid4())).status_code == 201
        assert expired_left() == 10  # not yet the 3rd completion
        assert post(client_a, "/t/function/", key=str(uuid.uuid4())).status_code == 201
        assert expired_left() == 6  # one batch of 4, after the commit
        for _ in range(6):
            post(client_a, "/t/function/", key=str(uuid.uuid4()))
    assert expired_left() == 0
    assert IdempotencyRecord.objects.count() == 9  # the live records all stay


def test_function_calls_purge_too() -> None:
    bulk(5, expired=True, prefix="old")

    @idempotent_function(key="call:{n}", store=store_of(DB_STORE))
    def call(n: int) -> int:
        return n

    with override_settings(IDEMPOTENCY={"PURGE_EVERY": 2}):
        call(n=1)
        call(n=2)
    assert expired_left() == 0


def test_none_turns_it_off(client_a: Client, wallet: Any) -> None:
    bulk(3, expired=True, prefix="old")
    with override_settings(IDEMPOTENCY={**using(DB_STORE), "PURGE_EVERY": None}):
        for _ in range(5):
            post(client_a, "/t/function/", key=str(uuid.uuid4()))
    assert expired_left() == 3


@pytest.mark.postgres
def test_the_purge_skips_rows_another_transaction_holds_and_does_not_wait(
    client_a: Client, wallet: Any
) -> None:
    if not on_postgres():
        pytest.skip("SKIP LOCKED: PostgreSQL")
    bulk(4, expired=True, prefix="old")
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic():
            list(IdempotencyRecord.objects.select_for_update().filter(key="old-0"))
            held.set()
            done.wait(30)
        connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        with override_settings(IDEMPOTENCY={**using(DB_STORE), "PURGE_EVERY": 1}):
            started = time.monotonic()
            assert post(client_a, "/t/function/", key=str(uuid.uuid4())).status_code == 201
            # no wait on the held row (held until this test ends: 30 s), with room for a
            # stall of this loaded process (a wait would also have purged old-0, below)
            assert time.monotonic() - started < 15
        assert set(
            IdempotencyRecord.objects.filter(key__startswith="old-").values_list("key", flat=True)
        ) == {"old-0"}
    finally:
        done.set()
        holder.join()


def warnings_of(**idempotency: Any) -> list[str]:
    with override_settings(IDEMPOTENCY=idempotency):
        return [m.id for m in check_settings() if m.id == "idempotency.W040"]


@pytest.mark.urls("tests.testapp.token_urls")  # views that name no store of their own
@override_settings(CELERY_BEAT_SCHEDULE={})  # the sample's schedules the purge
def test_w040_when_nothing_purges_the_database() -> None:
    assert warnings_of(PURGE_EVERY=None) == ["idempotency.W040"]
    assert warnings_of() == []  # PURGE_EVERY's default purges
    assert warnings_of(PURGE_EVERY=None, **using(REDIS_STORE)) == []  # Redis expires its own
    beat = {"purge": {"task": "idempotency.purge_expired_records", "schedule": 3600}}
    with override_settings(CELERY_BEAT_SCHEDULE=beat):
        assert warnings_of(PURGE_EVERY=None) == []
    other = {"other": {"task": "shop.reconcile", "schedule": 3600}}
    with override_settings(CELERY_BEAT_SCHEDULE=other):
        assert warnings_of(PURGE_EVERY=None) == ["idempotency.W040"]


def test_w040_is_reported_by_the_check_command() -> None:
    with override_settings(IDEMPOTENCY={"PURGE_EVERY": None}, CELERY_BEAT_SCHEDULE={}):
        found = checks.run_checks()
    assert "idempotency.W040" in [m.id for m in found]
