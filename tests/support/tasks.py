"""Celery apps for the in-process task tests: tasks applied with ``apply()``, no broker."""

from __future__ import annotations

from celery import Celery


def inprocess_app(name: str) -> Celery:
    """A Celery app of its own (not the current one) that stores no results."""
    app = Celery(name, set_as_current=False)
    app.conf.update(task_always_eager=False, task_store_eager_result=False, result_backend=None)
    return app
