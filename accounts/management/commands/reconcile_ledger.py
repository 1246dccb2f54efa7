"""``manage.py reconcile_ledger``: run the scheduled ledger reconciliation now."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from accounts.tasks import reconcile_ledger


class Command(BaseCommand):
    help = (
        "Reconcile every account's balance against the sum of its ledger and record the "
        "run (the Celery beat job accounts.reconcile_ledger, run in this process). Skips "
        "when another run holds the reconcile-ledger lock."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        result = reconcile_ledger()
        if result["status"] == "skipped":
            self.stdout.write("reconcile_ledger: skipped (another run holds the lock)")
            return
        self.stdout.write(
            f"reconcile_ledger: run {result['run_id']}: {result['accounts_checked']} "
            f"account(s) checked, {result['mismatches']} mismatch(es)"
        )
