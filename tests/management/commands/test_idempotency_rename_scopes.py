"""``manage.py idempotency_rename_scopes``: records of ``user:<pk>`` scopes renamed to the
scope naming the user model (its ``rename_legacy_scopes``), with one
summary line; the upgrade end to end is in tests/test_scopes.py."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from idempotency.models import IdempotencyRecord
from tests.support.records import record

pytestmark = pytest.mark.django_db


def rename_command(*args: str) -> str:
    out = StringIO()
    call_command("idempotency_rename_scopes", *args, stdout=out)
    return out.getvalue().strip()


def record_scopes() -> list[str]:
    return sorted(IdempotencyRecord.objects.values_list("scope", flat=True))


def test_a_dry_run_counts_and_renames_nothing() -> None:
    IdempotencyRecord.objects.bulk_create([record(key="a", scope="user:1"), record(key="b")])
    assert rename_command("--dry-run") == (
        "Would rename 2 idempotency records to scopes naming the user model; 0 left "
        "(their new scope and key are taken)."
    )
    assert record_scopes() == ["user:1", "user:1"]


def test_renames_in_batches_and_leaves_a_record_whose_new_name_is_taken() -> None:
    IdempotencyRecord.objects.bulk_create(
        [
            record(key="a", scope="user:1"),
            record(key="b", scope="user:2"),
            record(key="c", scope="user:3"),
            record(key="c", scope="auth.user:3"),
            record(key="d", scope="shop"),
        ]
    )
    assert rename_command("--batch-size", "1") == (
        "Renamed 2 idempotency records to scopes naming the user model; 1 left "
        "(their new scope and key are taken)."
    )
    assert record_scopes() == ["auth.user:1", "auth.user:2", "auth.user:3", "shop", "user:3"]


def test_a_batch_size_below_one_is_one() -> None:
    IdempotencyRecord.objects.bulk_create([record(key="a", scope="user:1")])
    assert rename_command("--batch-size", "0").startswith("Renamed 1 idempotency records")
    assert record_scopes() == ["auth.user:1"]
