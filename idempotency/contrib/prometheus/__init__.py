"""Prometheus metrics (optional: ``pip install "/path/to/django-idempotency[metrics]"``).

Add ``"idempotency.contrib.prometheus"`` to ``INSTALLED_APPS`` (its ``ready()`` connects
the receivers) and set ``IDEMPOTENCY = {"METRICS": True}`` (the receivers count only while
it is on, so ``override_settings`` turns them on too). Serve them with :func:`metrics_view`.

* ``idempotency_outcomes_total{outcome, route, store}``: one count per outcome
  (see :data:`idempotency.signals.OUTCOMES`).
* ``idempotency_claim_seconds{store}``: how long the store took to decide who owns
  a key, one observation per request.
* ``idempotency_in_progress_records{store}``: records still in progress, sampled
  each time expired records are purged (the hourly beat task).

Labels are the URL pattern and the store's class name: bounded, never a key, a
scope or a user. Several worker processes: set ``PROMETHEUS_MULTIPROC_DIR`` as
``prometheus_client`` documents, and the view aggregates every process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.observability import store_name

OUTCOMES = Counter(
    "idempotency_outcomes",
    "Requests and calls that took part in idempotency, by outcome.",
    ["outcome", "route", "store"],
)
CLAIM_SECONDS = Histogram(
    "idempotency_claim_seconds",
    "Seconds the store took to decide who owns a key.",
    ["store"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
IN_PROGRESS = Gauge(
    "idempotency_in_progress_records",
    "Records still in progress, sampled by the purge of expired records.",
    ["store"],
    multiprocess_mode="livemax",
)


def _receiver(outcome: str) -> Callable[..., None]:
    def receive(sender: Any, **kwargs: Any) -> None:
        if not idempotency_settings.METRICS:
            return
        store = store_name(sender, kwargs)
        OUTCOMES.labels(outcome, kwargs.get("route") or "-", store).inc()
        seconds = kwargs.get("claim_seconds")
        if isinstance(seconds, float):
            CLAIM_SECONDS.labels(store).observe(seconds)

    return receive


def sample_in_progress(*, using: str | None = None) -> int:
    """Set the in-progress gauge from the database store's table; the count."""
    from idempotency.models import IdempotencyRecord, RecordState
    from idempotency.stores.base import configured_database

    alias = using or configured_database()
    count = IdempotencyRecord.objects.using(alias).filter(state=RecordState.IN_PROGRESS).count()
    IN_PROGRESS.labels("DatabaseStore").set(count)
    return count


def _on_purged(sender: Any, *, using: str | None = None, **kwargs: Any) -> None:
    if idempotency_settings.METRICS:
        sample_in_progress(using=using)


_RECEIVERS = {outcome: _receiver(outcome) for outcome in signals.OUTCOMES}


def connect() -> None:
    """Connect the metric receivers (idempotent; done by the app once the setting is on)."""
    for outcome, receive in _RECEIVERS.items():
        signals.OUTCOMES[outcome].connect(
            receive, dispatch_uid=f"idempotency.contrib.prometheus.{outcome}"
        )
    signals.purged.connect(_on_purged, dispatch_uid="idempotency.contrib.prometheus.purged")


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus exposition of this process (or of every process, multiprocess)."""
    registry: CollectorRegistry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        # prometheus_client declares no types on MultiProcessCollector
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


__all__ = ["CLAIM_SECONDS", "IN_PROGRESS", "OUTCOMES", "connect", "metrics_view"]
