"""Django tasks (``django.tasks``; the ``django-tasks`` backport on Django 5.2) made
idempotent with ``@idempotent_django_task``, in both decorator orders, for
tests/contrib/django_tasks/test_django_tasks*.py.

Every body appends ``<label> <pid>`` to the executions file (``IDEMPOTENCY_TEST_EXECUTIONS``:
one line per run of the body, which no rollback undoes), waits ``seconds``, then writes
one :class:`~tests.testapp.models.Effect` row (in atomic mode in the claim's transaction,
so a run killed before its commit leaves none).
"""

from __future__ import annotations

import os
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async

from idempotency.contrib.django_tasks import idempotent_django_task
from tests.testapp.executions import ENV, executions, record_execution
from tests.testapp.models import Effect

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task  # type: ignore[no-redef,import-not-found,unused-ignore]  # one of the two is there

#: The lease of the lease-mode tasks, in seconds (the worker tests set it short).
LEASE = float(os.environ.get("IDEMPOTENCY_TEST_TASK_LEASE", "3"))


def effect(label: str, seconds: float) -> dict[str, Any]:
    record_execution(f"{label} {os.getpid()}")
    if seconds:
        time.sleep(seconds)  # real time: a task's work, which a real worker times
    Effect.objects.create(label=label, amount=1)
    return {"label": label, "pid": os.getpid()}


# -- @task over @idempotent_django_task ------------------------------------------------


@task(takes_context=True, backend="database")
@idempotent_django_task
def by_result_id(context: Any, label: str, seconds: float = 0) -> dict[str, Any]:
    """Keyed on the result id (the default)."""
    return effect(label, seconds)


@task(takes_context=True, backend="database")
@idempotent_django_task(key="receipt:{label}", fingerprint=["label"])
def by_label(context: Any, label: str, seconds: float = 0) -> dict[str, Any]:
    """Keyed on a business key (how long it takes is no part of the work)."""
    return effect(label, seconds)


@task(takes_context=True, backend="database")
@idempotent_django_task(key="lease:{label}", mode="lease", lease=LEASE, fingerprint=["label"])
def by_label_lease(context: Any, label: str, seconds: float = 0) -> dict[str, Any]:
    """Keyed on a business key, in lease mode (the effect commits on its own)."""
    return effect(label, seconds)


@task(takes_context=True, backend="database")
@idempotent_django_task(mode="lease", lease=LEASE)
def by_result_id_lease(context: Any, label: str, seconds: float = 0) -> dict[str, Any]:
    """Keyed on the result id, in lease mode."""
    return effect(label, seconds)


def fail_then_succeed(label: str, failures: int) -> dict[str, Any]:
    """Fails the first ``failures`` runs for ``label`` (counted in the executions file,
    which no rollback undoes), then succeeds."""
    path = Path(os.environ[ENV])
    tries = sum(count for line, count in executions(path).items() if line.split()[0] == label)
    record_execution(f"{label} {os.getpid()}")
    if tries < failures:
        raise RuntimeError(f"try {tries + 1} fails")
    Effect.objects.create(label=label, amount=1)
    return {"label": label, "tries": tries + 1}


@task(takes_context=True, backend="database")
@idempotent_django_task(key="flaky:{label}")
def flaky(context: Any, label: str, failures: int) -> dict[str, Any]:
    return fail_then_succeed(label, failures)


@task(takes_context=True, backend="database")
@idempotent_django_task(key="flaky-async:{label}")
async def flaky_async(context: Any, label: str, failures: int) -> dict[str, Any]:
    """:func:`flaky` as an async task (lease mode)."""
    return await sync_to_async(fail_then_succeed)(label, failures)


# -- @idempotent_django_task over @task ------------------------------------------------


@idempotent_django_task(key="flaky-outer:{label}")
@task(takes_context=True, backend="database")
def flaky_outer(context: Any, label: str, failures: int) -> dict[str, Any]:
    """:func:`flaky`, decorated in the other order."""
    return fail_then_succeed(label, failures)


@idempotent_django_task
@task(takes_context=True, backend="dummy")
def outer_by_result_id(context: Any, label: str) -> dict[str, Any]:
    return effect(label, 0)


@idempotent_django_task(key="outer:{label}")
@task(takes_context=True)
def outer_by_label(context: Any, label: str) -> dict[str, Any]:
    return effect(label, 0)


# -- the quick tier: typed results, the immediate and dummy backends --------------------


@task(takes_context=True, backend="dummy")
@idempotent_django_task(key="price:{label}")
def price(context: Any, label: str) -> Decimal:
    record_execution(label)
    return Decimal("10.10")


@task(takes_context=True, backend="dummy")
@idempotent_django_task(key="dummy:{label}", mode="lease")
def on_dummy(context: Any, label: str) -> dict[str, Any]:
    return effect(label, 0)


@task(takes_context=True, backend="dummy")
@idempotent_django_task(mode="lease")
def on_dummy_by_result_id(context: Any, label: str) -> dict[str, Any]:
    return effect(label, 0)


@task(takes_context=True)
@idempotent_django_task(key="immediate:{label}", mode="lease")
def on_immediate(context: Any, label: str) -> dict[str, Any]:
    return effect(label, 0)


@task(takes_context=True, backend="dummy")
@idempotent_django_task(key="optional:{order_id}", optional=True)
def optional_key(context: Any, order_id: int | None) -> None:
    record_execution("optional")


@task(takes_context=True, backend="dummy")
@idempotent_django_task(key="async:{label}")
async def on_dummy_async(context: Any, label: str) -> dict[str, Any]:
    return await sync_to_async(effect)(label, 0)


@task()
@idempotent_django_task
def context_without_takes_context(context: Any, label: str) -> None:
    """Wrong: its first parameter is ``context``, but the task is declared without
    ``takes_context=True``, so a run passes none."""
