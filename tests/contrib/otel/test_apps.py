"""The OpenTelemetry app: its ``ready()`` registers the spans with the engine's tracing hook,
and the metric receivers are connected whenever ``OPENTELEMETRY`` is turned on."""

from __future__ import annotations

from django.dispatch import Signal
from django.test import override_settings

from idempotency import observability, signals
from idempotency.contrib import otel

UID = "idempotency.contrib.otel.replayed"


def connected(signal: Signal, dispatch_uid: str) -> bool:
    # an entry is (lookup_key, receiver[, is_async]); lookup_key (dispatch_uid, sender id)
    return any(entry[0][0] == dispatch_uid for entry in signal.receivers)


def test_ready_registered_the_spans_with_the_tracing_hook() -> None:
    assert observability._spans == [otel.spanned]


def test_turning_the_setting_on_connects_the_metric_receivers() -> None:
    signals.replayed.disconnect(dispatch_uid=UID)
    with override_settings(IDEMPOTENCY={"OPENTELEMETRY": False}):
        assert not connected(signals.replayed, UID)
    with override_settings(IDEMPOTENCY={"OPENTELEMETRY": True}):
        assert connected(signals.replayed, UID)
