"""Bounded growth per caller (issue 36, finding 8): nothing bounded how many records one
caller made; now MAX_NEW_RECORDS per RECORD_WINDOW (429 with Retry-After) and ERROR_TTL
for definitive 4xx answers, on every store, under concurrency on PostgreSQL and Redis."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from idempotency.models import IdempotencyRecord
from tests.support.clocks import QuotaClock, quota_clock
from tests.support.http import post
from tests.support.stores import STORE_VARIANTS, variant_params
from tests.support.storms import run_threads, succeeded
from tests.support.users import logged_in_client
from tests.testapp.executions import executions

pytestmark = pytest.mark.django_db(transaction=True)


# fmt: skip


WINDOW = 60
URL = "/t/outcome/"


def capped(variant: str, limit: int, **extra: Any) -> dict[str, Any]:
    return {**STORE_VARIANTS[variant], "MAX_NEW_RECORDS": limit, "RECORD_WINDOW": WINDOW, **extra}


@pytest.fixture(autouse=True)
def fresh_window() -> Iterator[QuotaClock]:
    """Each test counts in one window, at its start: the windows are fixed (epoch
    seconds), so on the wall clock requests that straddle a window's end are counted in
    two windows, and a cap of 3 let a 4th request through (CI, once)."""
    with quota_clock(WINDOW) as clock:
        yield clock


def test_by_default_nothing_bounds_a_callers_records(
    store_variant: str, client_a: Client, wallet: Any
) -> None:
    """The finding as it was (and stays, by default: the cap is opt-in)."""
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[store_variant]):
        answers = [post(client_a, URL, key=str(uuid.uuid4())).status_code for _ in range(12)]
    assert answers == [201] * 12


def test_a_caller_over_its_cap_gets_429_and_its_replays_still_work(
    store_variant: str, client_a: Client, client_b: Client, wallet: Any, execution_log: Path
) -> None:
    keys = [str(uuid.uuid4()) for _ in range(4)]
    with override_settings(IDEMPOTENCY=capped(store_variant, 3)):
        firsts = [post(client_a, URL, key=key) for key in keys]
        assert [r.status_code for r in firsts] == [201, 201, 201, 429]
        refused = firsts[3]
        assert refused["Content-Type"] == "application/problem+json"
        assert json.loads(refused.content)["code"] == "idempotency-too-many-records"
        assert 1 <= int(refused["Retry-After"]) <= 60
        again = [post(client_a, URL, key=key) for key in keys[:3]]  # replays are not new records
        assert [r["Idempotent-Replayed"] for r in again] == ["true"] * 3
        assert post(client_b, URL, key=str(uuid.uuid4())).status_code == 201  # another caller
        assert post(client_a, URL, key=keys[3]).status_code == 429  # still over, never ran
    assert executions(execution_log)[keys[3]] == 0
    assert not IdempotencyRecord.objects.filter(key=keys[3]).exists()


def test_a_new_window_lets_a_capped_caller_make_records_again(
    store_variant: str, client_a: Client, wallet: Any, fresh_window: QuotaClock
) -> None:
    with override_settings(IDEMPOTENCY=capped(store_variant, 1)):
        assert post(client_a, URL, key=str(uuid.uuid4())).status_code == 201
        assert post(client_a, URL, key=str(uuid.uuid4())).status_code == 429
        fresh_window.advance(WINDOW)
        assert post(client_a, URL, key=str(uuid.uuid4())).status_code == 201


@pytest.mark.server_db  # concurrent threads: SQLite would lock, not count
@pytest.mark.parametrize("variant", variant_params("db-atomic", "db-lease", "db-cached", "redis"))
def test_the_cap_holds_under_concurrent_first_requests(
    variant: str, user: Any, wallet: Any, execution_log: Path
) -> None:
    """20 callers' threads at once, each with a new key of one user: exactly the cap
    runs, the rest are 429 (the count is one atomic step per store)."""
    limit, threads = 5, 20
    keys = [str(uuid.uuid4()) for _ in range(threads)]
    with override_settings(IDEMPOTENCY=capped(variant, limit)):

        def attempt(index: int) -> int:
            return int(post(logged_in_client(user), URL, key=keys[index]).status_code)

        statuses = succeeded(run_threads(threads, attempt))
    assert len(statuses) == threads
    assert statuses.count(201) == limit
    assert statuses.count(429) == threads - limit
    assert sum(executions(execution_log)[key] for key in keys) == limit


def test_a_view_sets_its_own_cap(client_a: Client, wallet: Any) -> None:
    from idempotency.http.options import Policy

    policy = Policy(max_new_records=2, record_window=30)
    assert (policy.get_max_new_records(), policy.get_record_window()) == (2, 30.0)
    with pytest.raises(ValueError, match="max_new_records"):
        Policy(max_new_records=0)


def test_error_ttl_zero_keeps_no_4xx(
    store_variant: str, client_a: Client, wallet: Any, execution_log: Path
) -> None:
    """200 invalid POSTs left 200 stored 400s for 24 h; with ERROR_TTL 0 they leave none."""
    keys = [str(uuid.uuid4()) for _ in range(5)]
    with override_settings(IDEMPOTENCY={**STORE_VARIANTS[store_variant], "ERROR_TTL": 0}):
        for key in keys:
            assert post(client_a, "/t/outcome/?status=400", key=key).status_code == 400
        again = post(client_a, "/t/outcome/?status=400", key=keys[0])
        ok = str(uuid.uuid4())
        assert post(client_a, URL, key=ok).status_code == 201
        assert post(client_a, URL, key=ok)["Idempotent-Replayed"] == "true"  # 2xx kept as before
    assert "Idempotent-Replayed" not in again
    assert executions(execution_log)[keys[0]] == 2
    assert not IdempotencyRecord.objects.filter(key__in=keys).exists()


@pytest.mark.parametrize("variant", ["db-atomic", "db-lease"])
def test_error_ttl_shortens_how_long_a_4xx_is_kept(
    variant: str, client_a: Client, wallet: Any
) -> None:
    bad, good = str(uuid.uuid4()), str(uuid.uuid4())
    with override_settings(IDEMPOTENCY={**STORE_VARIANTS[variant], "ERROR_TTL": 300}):
        assert post(client_a, "/t/outcome/?status=422", key=bad).status_code == 422
        assert post(client_a, URL, key=good).status_code == 201
        assert post(client_a, "/t/outcome/?status=422", key=bad)["Idempotent-Replayed"] == "true"
    now = timezone.now()
    kept = {r.key: (r.expires_at - now).total_seconds() for r in IdempotencyRecord.objects.all()}
    assert 200 < kept[bad] <= 300
    assert kept[good] > 86000


def test_ended_windows_counters_are_purged(client_a: Client, wallet: Any) -> None:
    from datetime import timedelta

    from idempotency.models import RecordQuota
    from idempotency.stores.database import purge_expired_records

    with override_settings(IDEMPOTENCY=capped("db-atomic", 5)):
        post(client_a, URL, key=str(uuid.uuid4()))
    assert RecordQuota.objects.get().count == 1
    purge_expired_records()
    assert RecordQuota.objects.count() == 1  # its window is still open
    purge_expired_records(now=timezone.now() + timedelta(seconds=61))
    assert not RecordQuota.objects.exists()
