"""App configuration of django-idempotency."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core import checks
from django.utils.translation import gettext_lazy as _


def connect_observers() -> None:
    """Connect the log receivers; this runs again whenever the settings change.

    Prometheus and OpenTelemetry are apps of their own (``idempotency.contrib.prometheus``,
    ``idempotency.contrib.otel``) that connect their receivers in their ``ready()``.
    """
    from idempotency.observability import connect

    connect()


# The system checks (idempotency.checks) import every part they check: registered here,
# they are imported when Django runs them (check, migrate, runserver), not by every worker.


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from idempotency import checks as idempotency_checks

    return idempotency_checks.check_settings(app_configs, **kwargs)


def check_redis_persistence(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from idempotency import checks as idempotency_checks

    return idempotency_checks.check_redis_persistence(app_configs, **kwargs)


def check_problem_documentation(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    from idempotency import checks as idempotency_checks

    return idempotency_checks.check_problem_documentation(app_configs, **kwargs)


class IdempotencyConfig(AppConfig):
    name = "idempotency"
    verbose_name = _("Idempotency")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from idempotency.conf import on_reload

        checks.register(check_settings)
        checks.register(check_redis_persistence, deploy=True)
        checks.register(check_problem_documentation, deploy=True)

        connect_observers()
        on_reload(connect_observers)
