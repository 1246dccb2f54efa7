"""App configuration of django-idempotency."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


def connect_observers() -> None:
    """Connect the log receivers; this runs again whenever the settings change.

    Prometheus and OpenTelemetry are apps of their own (``idempotency.contrib.prometheus``,
    ``idempotency.contrib.otel``) that connect their receivers in their ``ready()``.
    """
    from idempotency.observability import logs

    logs.connect()


class IdempotencyConfig(AppConfig):
    name = "idempotency"
    verbose_name = _("Idempotency")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import idempotency.checks  # noqa: F401  (registers the system checks)
        from idempotency.conf import on_reload

        connect_observers()
        on_reload(connect_observers)
