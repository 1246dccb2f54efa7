"""``manage.py purge_idempotency_records``: a thin wrapper over
:func:`~idempotency.stores.database.purge_expired_records` that prints one summary line."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from idempotency.management.commands.purge_idempotency_records import summary
from idempotency.models import IdempotencyRecord
from idempotency.stores.database import PurgeResult
from tests.support.records import bulk

pytestmark = pytest.mark.django_db

SUMMARY = r"^{verb} {n} expired idempotency {records} in {b} {batches} \(\d+\.\d\d s\)\.$"


def purge_command(*args: str) -> str:
    out = StringIO()
    call_command("purge_idempotency_records", *args, stdout=out)
    return out.getvalue().strip()


def test_command_purges_and_prints_one_summary_line() -> None:
    bulk(25, expired=True, prefix="old")
    bulk(2, expired=False, prefix="live")

    output = purge_command("--batch-size", "10")

    assert re.match(
        SUMMARY.format(verb="Purged", n=25, records="records", b=3, batches="batches"), output
    ), output
    assert IdempotencyRecord.objects.count() == 2


def test_command_dry_run() -> None:
    bulk(25, expired=True)

    output = purge_command("--batch-size", "10", "--dry-run")

    assert re.match(
        SUMMARY.format(verb="Would purge", n=25, records="records", b=3, batches="batches"),
        output,
    ), output
    assert IdempotencyRecord.objects.count() == 25


def test_command_max_batches_and_singular_wording() -> None:
    bulk(3, expired=True)

    output = purge_command("--batch-size", "1", "--max-batches", "1")

    assert re.match(
        SUMMARY.format(verb="Purged", n=1, records="record", b=1, batches="batch"), output
    ), output
    assert IdempotencyRecord.objects.count() == 2


@pytest.mark.parametrize("args", [("--batch-size", "0"), ("--max-batches", "x")])
def test_command_rejects_bad_bounds(args: tuple[str, str]) -> None:
    with pytest.raises(CommandError):
        purge_command(*args)


def test_the_database_option_picks_the_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    from idempotency.management.commands import purge_idempotency_records as command

    seen: list[object] = []

    def purge(**kwargs: object) -> PurgeResult:
        seen.append(kwargs["using"])
        return PurgeResult(deleted=0, batches=0, seconds=0.0, longest_batch_seconds=0.0)

    monkeypatch.setattr(command, "purge_expired_records", purge)
    purge_command()
    purge_command("--database", "other")
    assert seen == [None, "other"]


def test_the_summary_counts_in_words() -> None:
    one = PurgeResult(deleted=1, batches=1, seconds=0.5, longest_batch_seconds=0.5)
    many = PurgeResult(deleted=2, batches=0, seconds=0.0, longest_batch_seconds=0.0)
    assert summary(one, dry_run=False) == (
        "Purged 1 expired idempotency record in 1 batch (0.50 s)."
    )
    assert summary(many, dry_run=True) == (
        "Would purge 2 expired idempotency records in 0 batches (0.00 s)."
    )
