"""Model constraints that read the same on every supported Django."""

from __future__ import annotations

from typing import Any

import django
from django.db import models


def check_constraint(*, condition: Any, name: str) -> models.CheckConstraint:
    """A ``CheckConstraint``: Django 5.1 renamed ``check=`` to ``condition=``."""
    if django.VERSION >= (5, 1):
        return models.CheckConstraint(condition=condition, name=name)
    legacy: dict[str, Any] = {"check": condition}
    return models.CheckConstraint(name=name, **legacy)
