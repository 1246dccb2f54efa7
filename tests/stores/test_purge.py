"""purge_expired_records() (``idempotency.stores.database``): expired records deleted in
bounded batches; the command is in tests/management/commands/."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from idempotency.models import IdempotencyRecord
from idempotency.stores.database import PurgeResult, _delete_batch, purge_expired_records
from tests.support.records import bulk, record
from tests.support.storms import run_threads, succeeded

pytestmark = pytest.mark.django_db


def keys() -> set[str]:
    return set(IdempotencyRecord.objects.values_list("key", flat=True))


def test_purges_only_expired_records_in_batches() -> None:
    bulk(25, expired=True, prefix="old")
    live = bulk(5, expired=False, prefix="live")

    result = purge_expired_records(batch_size=10)

    assert isinstance(result, PurgeResult)
    assert (result.deleted, result.batches) == (25, 3)
    assert keys() == {r.key for r in live}
    assert 0 <= result.longest_batch_seconds <= result.seconds


def test_a_full_last_batch_is_not_followed_by_an_empty_one() -> None:
    bulk(20, expired=True)

    result = purge_expired_records(batch_size=10)

    assert (result.deleted, result.batches) == (20, 2)
    assert not IdempotencyRecord.objects.exists()


def test_nothing_to_purge() -> None:
    bulk(3, expired=False)

    result = purge_expired_records(batch_size=10)

    assert (result.deleted, result.batches, result.longest_batch_seconds) == (0, 0, 0.0)
    assert IdempotencyRecord.objects.count() == 3


def test_dry_run_counts_and_deletes_nothing() -> None:
    bulk(25, expired=True, prefix="old")
    bulk(5, expired=False, prefix="live")

    result = purge_expired_records(batch_size=10, dry_run=True)

    assert (result.deleted, result.batches) == (25, 3)
    assert IdempotencyRecord.objects.count() == 30


def test_max_batches_bounds_the_work() -> None:
    bulk(25, expired=True)

    first = purge_expired_records(batch_size=10, max_batches=2)
    assert (first.deleted, first.batches) == (20, 2)
    assert IdempotencyRecord.objects.count() == 5

    dry = purge_expired_records(batch_size=2, max_batches=2, dry_run=True)
    assert (dry.deleted, dry.batches) == (4, 2)

    rest = purge_expired_records(batch_size=10, max_batches=2)
    assert (rest.deleted, rest.batches) == (5, 1)
    assert not IdempotencyRecord.objects.exists()


def test_cut_off_is_now_or_the_given_time_inclusive() -> None:
    now = timezone.now()
    IdempotencyRecord.objects.bulk_create(
        [
            record(key="past", expires_at=now - timedelta(seconds=1)),
            record(key="at", expires_at=now),
            record(key="soon", expires_at=now + timedelta(minutes=5)),
        ]
    )

    assert purge_expired_records(now=now - timedelta(minutes=1)).deleted == 0
    assert purge_expired_records(now=now).deleted == 2
    assert keys() == {"soon"}
    assert purge_expired_records(now=now + timedelta(minutes=10)).deleted == 1


def test_default_batch_size_is_the_setting() -> None:
    bulk(9, expired=True)

    with override_settings(IDEMPOTENCY={"PURGE_BATCH_SIZE": 4}):
        result = purge_expired_records()

    assert (result.deleted, result.batches) == (9, 3)


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"batch_size": -5}, {"max_batches": 0}])
def test_rejects_bounds_that_are_not_positive(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        purge_expired_records(**kwargs)


def test_generic_batch_selects_keys_then_deletes_them_in_chunks() -> None:
    # the path of every database but PostgreSQL; more rows than SQLite's 999 parameters
    bulk(1200, expired=True, prefix="old")
    bulk(3, expired=False, prefix="live")

    deleted = _delete_batch(connection, timezone.now(), 1100)

    assert deleted == 1100
    assert IdempotencyRecord.objects.count() == 103
    assert _delete_batch(connection, timezone.now(), 1100) == 100
    assert keys() == {"live-0", "live-1", "live-2"}


def test_generic_batch_keeps_a_record_claimed_again_since_the_select() -> None:
    (old,) = bulk(1, expired=True)
    cutoff = timezone.now()
    # a claim took the expired key over between the batch's select and its delete
    IdempotencyRecord.objects.filter(pk=old.pk).update(expires_at=cutoff + timedelta(days=1))

    assert _delete_batch(connection, cutoff, 10) == 0
    assert IdempotencyRecord.objects.filter(pk=old.pk).exists()


# -- a server database: concurrent purges share the work ------------------------------------


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
def test_concurrent_purges_delete_each_record_once() -> None:
    bulk(3000, expired=True, prefix="old")
    bulk(10, expired=False, prefix="live")
    results = succeeded(run_threads(3, lambda _: purge_expired_records(batch_size=50)))
    assert sum(r.deleted for r in results) == 3000
    assert IdempotencyRecord.objects.count() == 10
