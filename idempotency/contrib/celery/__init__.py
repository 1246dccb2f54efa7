"""Idempotent Celery tasks (``IdempotentTask``, ``@idempotent_task``), their redelivery, and
the periodic tasks this package registers."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from idempotency.contrib.celery import periodic  # noqa: F401 (registers them)

# name -> the module that defines it, imported on first use (as idempotency's own
# names are): importing a sibling module never imports this one's code
_EXPORTS: dict[str, str] = {
    "TaskAnswers": "idempotency.contrib.celery.task",
    "IdempotentTask": "idempotency.contrib.celery.task",
    "idempotent_task": "idempotency.contrib.celery.task",
    "purge_expired_records_task": "idempotency.contrib.celery.task",
    "purge_expired_submit_tokens_task": "idempotency.contrib.celery.task",
}

__all__ = [
    "IdempotentTask",
    "TaskAnswers",
    "idempotent_task",
    "purge_expired_records_task",
    "purge_expired_submit_tokens_task",
]


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module_name), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover - static re-exports for type checkers
    from idempotency.contrib.celery.task import IdempotentTask as IdempotentTask
    from idempotency.contrib.celery.task import TaskAnswers as TaskAnswers
    from idempotency.contrib.celery.task import idempotent_task as idempotent_task
    from idempotency.contrib.celery.task import (
        purge_expired_records_task as purge_expired_records_task,
    )
    from idempotency.contrib.celery.task import (
        purge_expired_submit_tokens_task as purge_expired_submit_tokens_task,
    )
