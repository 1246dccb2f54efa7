"""Idempotent Celery tasks (``IdempotentTask``, ``@idempotent_task``) and the beat tasks
this package registers (importing this module registers them)."""

from idempotency.contrib.celery.task import (
    IdempotentTask,
    idempotent_task,
    purge_expired_records_task,
    purge_expired_submit_tokens_task,
)

__all__ = [
    "IdempotentTask",
    "idempotent_task",
    "purge_expired_records_task",
    "purge_expired_submit_tokens_task",
]
