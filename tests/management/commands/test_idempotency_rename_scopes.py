"""``manage.py idempotency_rename_scopes``: the database store's ``user:<pk>`` records
carried over to ``auth.user:<pk>`` in batches, a record whose new name is taken left as it
is, ``--dry-run`` counting only, and one line saying what was (or would be) done. (The
upgrade it serves, a retry replaying across it: tests/test_scopes.py.)"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from idempotency.models import IdempotencyRecord
from tests.support.records import record

pytestmark = pytest.mark.django_db


def rename(*args: str) -> str:
    out = StringIO()
    call_command("idempotency_rename_scopes", *args, stdout=out)
    return out.getvalue().strip()


def scopes() -> dict[str, str]:
    return dict(IdempotencyRecord.objects.values_list("key", "scope"))


@pytest.fixture
def legacy() -> dict[str, str]:
    """Three ``user:7`` records, one of whose new names is taken, and one of another scope."""
    for key in ("k1", "k2", "k3"):
        record(key=key, scope="user:7").save()
    record(key="k3", scope="auth.user:7").save()
    record(key="k4", scope="shop").save()
    return scopes()


def test_a_dry_run_counts_and_renames_nothing(legacy: dict[str, str]) -> None:
    assert rename("--dry-run") == (
        "Would rename 2 idempotency records to scopes naming the user model; "
        "1 left (their new scope and key are taken)."
    )
    assert scopes() == legacy


@pytest.mark.parametrize("batch", ["1", "1000", "0"])
def test_records_are_renamed_in_batches_but_a_taken_name(
    legacy: dict[str, str], batch: str
) -> None:
    assert rename("--batch-size", batch) == (
        "Renamed 2 idempotency records to scopes naming the user model; "
        "1 left (their new scope and key are taken)."
    )
    found = IdempotencyRecord.objects.values_list("scope", "key")
    assert sorted(found) == [
        ("auth.user:7", "k1"),
        ("auth.user:7", "k2"),
        ("auth.user:7", "k3"),
        ("shop", "k4"),
        ("user:7", "k3"),
    ]
    assert rename() == (
        "Renamed 0 idempotency records to scopes naming the user model; "
        "1 left (their new scope and key are taken)."
    )
