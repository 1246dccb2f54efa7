"""The test app's committed effects (``Effect`` rows), counted by label."""

from __future__ import annotations

from tests.testapp.models import Effect


def effects(label: str) -> int:
    """How many ``Effect`` rows labelled ``label`` committed (a task's or a view's work)."""
    return Effect.objects.filter(label=label).count()
