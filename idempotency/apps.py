"""App configuration of django-idempotency."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


def connect_observers() -> None:
    """Connect the log receivers, the metric ones once ``METRICS`` is on, and the
    OpenTelemetry ones once ``OPENTELEMETRY`` is.

    ``prometheus_client`` and ``opentelemetry`` are imported only when enabled; this runs
    again whenever the settings change, so ``override_settings`` turns them on too.
    """
    from idempotency.conf import idempotency_settings
    from idempotency.observability import logs

    logs.connect()
    if idempotency_settings.METRICS:
        from idempotency.observability import metrics

        metrics.connect()
    if idempotency_settings.OPENTELEMETRY:
        from idempotency.observability import otel

        otel.connect()


class IdempotencyConfig(AppConfig):
    name = "idempotency"
    verbose_name = _("Idempotency")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import idempotency.checks  # noqa: F401  (registers the system checks)
        from idempotency.conf import on_reload

        connect_observers()
        on_reload(connect_observers)
