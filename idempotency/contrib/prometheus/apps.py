"""The app that counts outcomes in Prometheus metrics."""

from __future__ import annotations

from django.apps import AppConfig


class PrometheusConfig(AppConfig):
    name = "idempotency.contrib.prometheus"
    label = "idempotency_prometheus"
    verbose_name = "Idempotency: Prometheus metrics"

    def ready(self) -> None:
        from idempotency.conf import on_reload

        _connect_when_on()
        on_reload(_connect_when_on)


def _connect_when_on() -> None:
    """Connect the receivers once ``METRICS`` is on (again whenever the settings change,
    so ``override_settings`` turns them on too); while it is off, no signal is sent for
    them."""
    from idempotency.conf import idempotency_settings
    from idempotency.contrib.prometheus import connect

    if idempotency_settings.METRICS:
        connect()
