"""System checks of django-idempotency (ids ``idempotency.E0xx`` / ``W0xx``)."""

from __future__ import annotations

from typing import Any

from django.core import checks


@checks.register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return []
