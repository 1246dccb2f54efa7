"""The app that traces the engine's steps and counts outcomes with OpenTelemetry."""

from __future__ import annotations

from django.apps import AppConfig


class OpenTelemetryConfig(AppConfig):
    name = "idempotency.contrib.otel"
    label = "idempotency_otel"
    verbose_name = "Idempotency: OpenTelemetry"

    def ready(self) -> None:
        from idempotency.conf import on_reload
        from idempotency.contrib.otel import spanned
        from idempotency.observability import register

        register(spanned)
        _connect_when_on()
        on_reload(_connect_when_on)


def _connect_when_on() -> None:
    """Connect the metric receivers once ``OPENTELEMETRY`` is on (again whenever the
    settings change, so ``override_settings`` turns them on too); while it is off, no
    signal is sent for them, and the engine's steps run outside spans."""
    from idempotency.conf import idempotency_settings
    from idempotency.contrib.otel import connect

    if idempotency_settings.OPENTELEMETRY:
        connect()
