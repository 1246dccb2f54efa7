"""``manage.py idempotency_rename_scopes``: carry ``user:<pk>`` records over to the
scopes that name the principal's model (``auth.user:<pk>``)."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand

from idempotency.scopes import rename_legacy_scopes


class Command(BaseCommand):
    help = (
        "Rename the database store's records of user:<pk> scopes (before this version) to "
        "the scope the default now gives them (<app_label>.<model_name>:<pk>), so a retry "
        "sent across the upgrade still replays. Run it once every server runs the new "
        "version."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Count, rename nothing.")
        parser.add_argument(
            "--database",
            default=None,
            help="Database alias (default: the database of the configured DatabaseStore).",
        )
        parser.add_argument("--batch-size", type=int, default=1000, help="Records per batch.")

    def handle(self, *args: Any, **options: Any) -> None:
        renamed, skipped = rename_legacy_scopes(
            using=options["database"],
            dry_run=options["dry_run"],
            batch_size=max(1, options["batch_size"]),
        )
        verb = "Would rename" if options["dry_run"] else "Renamed"
        self.stdout.write(
            f"{verb} {renamed} idempotency records to scopes naming the user model; "
            f"{skipped} left (their new scope and key are taken)."
        )
