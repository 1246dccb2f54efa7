"""``manage.py purge_idempotency_records``: expired records deleted in bounded batches (or
counted, ``--dry-run``), one summary line, bounds that must be positive integers. (What
the purge itself deletes, and when: tests/stores/test_purge.py.)"""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from idempotency.management.commands.purge_idempotency_records import summary
from idempotency.models import IdempotencyRecord
from idempotency.stores.purge import PurgeResult
from tests.support.records import bulk

pytestmark = pytest.mark.django_db

SUMMARY = r"^{verb} {n} expired idempotency {records} in {b} {batches} \(\d+\.\d\d s\)\.$"


def run(*args: str) -> str:
    out = StringIO()
    call_command("purge_idempotency_records", *args, stdout=out)
    return out.getvalue().strip()


def test_command_purges_and_prints_one_summary_line() -> None:
    bulk(25, expired=True, prefix="old")
    bulk(2, expired=False, prefix="live")

    output = run("--batch-size", "10")

    assert re.match(
        SUMMARY.format(verb="Purged", n=25, records="records", b=3, batches="batches"), output
    ), output
    assert IdempotencyRecord.objects.count() == 2


def test_command_dry_run() -> None:
    bulk(25, expired=True)

    output = run("--batch-size", "10", "--dry-run")

    assert re.match(
        SUMMARY.format(verb="Would purge", n=25, records="records", b=3, batches="batches"),
        output,
    ), output
    assert IdempotencyRecord.objects.count() == 25


def test_command_max_batches_and_singular_wording() -> None:
    bulk(3, expired=True)

    output = run("--batch-size", "1", "--max-batches", "1")

    assert re.match(
        SUMMARY.format(verb="Purged", n=1, records="record", b=1, batches="batch"), output
    ), output
    assert IdempotencyRecord.objects.count() == 2


@pytest.mark.parametrize("args", [("--batch-size", "0"), ("--max-batches", "x")])
def test_command_rejects_bad_bounds(args: tuple[str, str]) -> None:
    with pytest.raises(CommandError):
        run(*args)


def test_the_summary_counts_records_and_batches_in_their_number() -> None:
    one = PurgeResult(deleted=1, batches=1, seconds=0.004, longest_batch_seconds=0.004)
    assert summary(one, dry_run=False) == "Purged 1 expired idempotency record in 1 batch (0.00 s)."
    many = PurgeResult(deleted=0, batches=0, seconds=1.5, longest_batch_seconds=0.0)
    assert summary(many, dry_run=True) == (
        "Would purge 0 expired idempotency records in 0 batches (1.50 s)."
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--batch-size", "0"), "'0' is not a positive integer"),
        (("--max-batches", "-1"), "'-1' is not a positive integer"),
        (("--max-batches", "x"), "'x' is not an integer"),
    ],
)
def test_the_parser_says_which_bound_is_wrong(args: tuple[str, str], said: str) -> None:
    bulk(1, expired=True)
    with pytest.raises(CommandError, match=f"argument {args[0]}: {said}"):
        run(*args)
    assert IdempotencyRecord.objects.count() == 1
