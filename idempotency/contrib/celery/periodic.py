"""The Celery beat tasks of django-idempotency (registered with
:mod:`idempotency.contrib.celery`)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="idempotency.purge_expired_records")
def purge_expired_records_task(
    batch_size: int | None = None, max_batches: int | None = None
) -> int:
    """Celery beat task: delete expired idempotency records in bounded batches.

    Schedule it with ``{"task": "idempotency.purge_expired_records", "schedule": 3600}``.
    Returns the number of records deleted.
    """
    from idempotency.stores.database import purge_expired_records

    result = purge_expired_records(batch_size=batch_size, max_batches=max_batches)
    return int(result.deleted)


@shared_task(name="idempotency.purge_expired_submit_tokens")
def purge_expired_submit_tokens_task(batch_size: int | None = None) -> int:
    """Celery beat task: delete expired one-time submit tokens (database backend)."""
    from idempotency.tokens import purge_expired_submit_tokens

    return purge_expired_submit_tokens(batch_size=batch_size)
