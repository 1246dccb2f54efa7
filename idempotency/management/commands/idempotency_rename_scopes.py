"""``manage.py idempotency_rename_scopes``: carry ``user:<pk>`` records over to the
scopes that name the principal's model (``auth.user:<pk>``)."""

from __future__ import annotations

import argparse
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import IntegrityError, transaction

from idempotency.stores.base import configured_database


def rename_legacy_scopes(
    *, using: str | None = None, dry_run: bool = False, batch_size: int = 1000
) -> tuple[int, int]:
    """Rename the database store's records of ``user:<pk>`` scopes (versions before
    principals were named) to ``<AUTH_USER_MODEL label>:<pk>``, in batches, each record
    in its own short transaction. Returns (renamed, skipped): a record whose new name is
    already taken is left as it is. ``dry_run`` counts without writing."""
    label = get_user_model()._meta.label_lower
    alias = using or configured_database()
    records = apps.get_model("idempotency", "IdempotencyRecord").objects.using(alias)
    renamed = skipped = 0
    last = 0
    while True:
        batch = list(
            records.filter(scope__startswith="user:", pk__gt=last)
            .order_by("pk")
            .values_list("pk", "scope", "key")[:batch_size]
        )
        if not batch:
            return renamed, skipped
        last = batch[-1][0]
        for pk, scope, key in batch:
            new = f"{label}:{scope.removeprefix('user:')}"
            if records.filter(scope=new, key=key).exists():
                skipped += 1
                continue
            if not dry_run:
                try:
                    with transaction.atomic(using=alias):
                        records.filter(pk=pk, scope=scope).update(scope=new)
                except IntegrityError:  # taken meanwhile by a new request
                    skipped += 1
                    continue
            renamed += 1


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
