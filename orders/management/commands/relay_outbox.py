"""``manage.py relay_outbox``: publish pending order events from the transactional outbox."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from orders.outbox import DEFAULT_BATCH_SIZE, outbox_pending_count, outbox_relay


class Command(BaseCommand):
    help = (
        "Publish pending outbox messages (order.paid) to the broker, oldest first, in "
        "bounded batches, and mark each one sent. At least once: consumers deduplicate "
        "by message id. Stops at the first publish the broker refuses."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
        parser.add_argument("--max-batches", type=int, default=None, help="default: until done")
        parser.add_argument("--broker-url", default=None, help="default: CELERY_BROKER_URL")
        parser.add_argument("--queue", default=None, help="default: the consumer's queue")
        parser.add_argument(
            "--throttle", type=float, default=0.0, help="seconds to pause between publishes"
        )
        parser.add_argument("--dry-run", action="store_true", help="only count what is pending")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["dry_run"]:
            self.stdout.write(f"relay_outbox: {outbox_pending_count()} pending (dry run)")
            return
        sent = failed = batches = 0
        pending = outbox_pending_count()
        while pending and (options["max_batches"] is None or batches < options["max_batches"]):
            result = outbox_relay(
                batch_size=options["batch_size"],
                broker_url=options["broker_url"],
                queue=options["queue"],
                throttle=options["throttle"],
            )
            batches += 1
            sent, failed, pending = sent + result.sent, failed + result.failed, result.pending
            if result.failed or not result.sent:
                break
        self.stdout.write(f"relay_outbox: {sent} sent, {failed} failed, {pending} pending")
