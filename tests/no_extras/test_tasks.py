"""Django's own tasks (``django.tasks``, Django 6.0+): a task enqueued again with the same
business key runs its body once, with no integration installed."""

from __future__ import annotations

from typing import Any

import pytest

tasks = pytest.importorskip(
    "django.tasks",
    reason="Django's tasks framework is Django 6.0+ (5.2 needs the django-tasks backport, "
    "which the core group does not install)",
)

from idempotency.contrib.django_tasks import idempotent_django_task  # noqa: E402

pytestmark = pytest.mark.django_db

SENT: list[int] = []


@tasks.task(takes_context=True)
@idempotent_django_task(key="receipt:{order_id}")
def send_receipt(context: Any, order_id: int) -> dict[str, Any]:
    SENT.append(order_id)
    return {"order_id": order_id, "sent": True}


def test_a_task_enqueued_again_with_its_key_runs_once() -> None:
    SENT.clear()
    first = send_receipt.enqueue(order_id=42)
    again = send_receipt.enqueue(order_id=42)
    assert first.id != again.id
    assert again.return_value == first.return_value == {"order_id": 42, "sent": True}
    assert SENT == [42]
