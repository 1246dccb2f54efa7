"""Celery tasks of the accounts app."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from accounts.locks import job_lock
from accounts.services import ledger_reconcile
from idempotency import LockNotAcquired

logger = logging.getLogger(__name__)

#: Name of the lock that keeps two reconciliations from running at once.
RECONCILE_LOCK = "reconcile-ledger"
#: Seconds after which a crashed run's lock frees itself; above the longest run.
RECONCILE_LOCK_TIMEOUT = 600.0


@shared_task(name="accounts.reconcile_ledger")
def reconcile_ledger() -> dict[str, Any]:
    """Scheduled job (Celery beat): reconcile every balance against its ledger.

    Runs under the lock ``reconcile-ledger`` without waiting, so two schedulers
    (two beat processes, a beat that fired twice, an operator running it by hand)
    never reconcile at once: the one that finds the lock held returns
    ``{"status": "skipped"}`` at once. Otherwise ``{"status": "done", ...}`` with
    the counts of the :class:`~accounts.models.ReconciliationRun` it recorded.
    """
    try:
        with job_lock(RECONCILE_LOCK, timeout=RECONCILE_LOCK_TIMEOUT):
            run = ledger_reconcile()
    except LockNotAcquired:
        logger.info("reconcile_ledger skipped: another run holds the lock %r", RECONCILE_LOCK)
        return {"status": "skipped"}
    return {
        "status": "done",
        "run_id": run.pk,
        "accounts_checked": run.accounts_checked,
        "mismatches": run.mismatches,
    }
