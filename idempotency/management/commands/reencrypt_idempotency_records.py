"""``manage.py reencrypt_idempotency_records``: stored bodies rewritten under the newest
key of ``BODY_ENCRYPTION_KEYS``, in bounded batches."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from idempotency.management.commands.purge_idempotency_records import positive_int
from idempotency.stores.reencryption import reencrypt_records


class Command(BaseCommand):
    help = (
        "Re-encrypt the bodies of live idempotency records under the first key of "
        "BODY_ENCRYPTION_KEYS (DatabaseStore or RedisStore), in bounded batches; then a "
        "retired key can be removed from the list. Safe to run while the site serves."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=positive_int,
            default=None,
            help="Records read per batch (default: the PURGE_BATCH_SIZE setting).",
        )
        parser.add_argument(
            "--store",
            default=None,
            help="Alias of the store in IDEMPOTENCY['STORES'] (default: 'default').",
        )
        parser.add_argument(
            "--plaintext",
            action="store_true",
            help="Also encrypt bodies stored in clear, before encryption was turned on.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Count the records, change nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = reencrypt_records(
                store=options["store"],
                batch_size=options["batch_size"],
                dry_run=options["dry_run"],
                plaintext=options["plaintext"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        verb = "Would re-encrypt" if options["dry_run"] else "Re-encrypted"
        self.stdout.write(
            f"{verb} {result.reencrypted} idempotency record bodies in {result.batches} "
            f"batches ({result.seconds:.2f} s); {result.unreadable} unreadable and "
            f"{result.forged} forged left as they are."
        )
