"""``manage.py purge_idempotency_records``: delete expired records in bounded batches."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from idempotency.stores.database import PurgeResult, purge_expired_records


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive integer")
    return number


def summary(result: PurgeResult, *, dry_run: bool) -> str:
    """The one-line summary the command prints."""
    verb = "Would purge" if dry_run else "Purged"
    records = "record" if result.deleted == 1 else "records"
    batches = "batch" if result.batches == 1 else "batches"
    return (
        f"{verb} {result.deleted} expired idempotency {records} "
        f"in {result.batches} {batches} ({result.seconds:.2f} s)."
    )


class Command(BaseCommand):
    help = (
        "Delete expired idempotency records in bounded batches, each its own short "
        "transaction. Safe to run while the site serves requests, and to interrupt."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=positive_int,
            default=None,
            help="Rows deleted per batch (default: the PURGE_BATCH_SIZE setting).",
        )
        parser.add_argument(
            "--max-batches",
            type=positive_int,
            default=None,
            help="Stop after this many batches (default: until no expired record is left).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Count the expired records, delete nothing.",
        )
        parser.add_argument(
            "--database",
            default=None,
            help="Database alias (default: the database of the configured DatabaseStore).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = purge_expired_records(
                batch_size=options["batch_size"],
                dry_run=options["dry_run"],
                max_batches=options["max_batches"],
                using=options["database"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(summary(result, dry_run=options["dry_run"]))
