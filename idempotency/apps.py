"""App configuration of django-idempotency."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


def connect_observers() -> None:
    """Connect the log receivers, and the metric ones once ``METRICS`` is on.

    ``prometheus_client`` is imported only when metrics are enabled; this runs again
    whenever the settings change, so ``override_settings`` turns metrics on too.
    """
    from idempotency import logs
    from idempotency.conf import idempotency_settings

    logs.connect()
    if idempotency_settings.METRICS:
        from idempotency import metrics

        metrics.connect()


class IdempotencyConfig(AppConfig):
    name = "idempotency"
    verbose_name = _("Idempotency")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import idempotency.checks  # noqa: F401  (registers the system checks)
        from idempotency.conf import on_reload

        connect_observers()
        on_reload(connect_observers)
