"""OpenTelemetry spans and metrics (optional: ``pip install "/path/to/django-idempotency[otel]"``).

Add ``"idempotency.contrib.otel"`` to ``INSTALLED_APPS`` and set
``IDEMPOTENCY = {"OPENTELEMETRY": True}``: the app registers :func:`spanned` with the
engine's tracing hook (:func:`idempotency.observability.spanned`) and connects the metric
receivers; the setting turns both on (``override_settings`` too). The library uses the API
alone: the application installs the SDK, its exporters and
``opentelemetry-instrumentation-django``, whose request span is the parent of these.

The spans (``idempotency.claim``, ``.replay``, ``.complete``, ``.release``), their
attributes and the metrics (``idempotency.outcomes``, ``idempotency.claim.duration``):
docs/howto/opentelemetry.md. No attribute holds a key, a scope, a body or a user: the key
only as :func:`~idempotency.observability.key_hash`, an error only by its class name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.exceptions import StoreUnavailable
from idempotency.observability import Keyed, key_hash, store_name

T = TypeVar("T")

OUTCOME = "idempotency.outcome"
STORE = "idempotency.store"

tracer = trace.get_tracer("idempotency")
meter = metrics.get_meter("idempotency")

OUTCOMES = meter.create_counter(
    "idempotency.outcomes",
    unit="{outcome}",
    description="Requests and calls that took part in idempotency, by outcome.",
)
CLAIM_DURATION = meter.create_histogram(
    "idempotency.claim.duration",
    unit="s",
    description="Seconds the store took to decide who owns a key.",
    explicit_bucket_boundaries_advisory=[
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5
    ],
)  # fmt: skip


def attributes(owner: Keyed) -> dict[str, str]:
    """What every span of ``owner`` carries: labels, and the key only as a hash."""
    return {
        STORE: type(owner.store).__name__,
        "idempotency.mode": owner.mode,
        "idempotency.scope.kind": owner.scope_kind,
        "idempotency.interface": owner.interface,
        "idempotency.key.hash": key_hash(owner.key),
    }


def outcome(name: str, operation: str, result: Any) -> str:
    """A step's outcome from what it returned.

    ``claim``: the store's answer, ``claimed``, ``completed``, ``in_progress`` or
    ``mismatch`` (``absent`` for a look-up that found nothing); ``replay``: ``replayed``;
    ``complete``: ``stored``, or ``stale_owner`` (the lease had run out and the key was
    taken over), or ``conflict`` (atomic mode's insert met a duplicate's record);
    ``release``: ``released``, or ``stale_owner``."""
    if name == "claim":
        return "absent" if result is None else str(result.status.value)
    if name == "replay":
        return "replayed"
    if result is False:
        return "conflict" if operation == "insert_completed" else "stale_owner"
    return "stored" if name == "complete" else "released"


@contextmanager
def spanned(name: str, owner: Keyed, operation: str) -> Iterator[Callable[[T], T]]:
    """The span ``idempotency.<name>``, a child of the current span (the request's, under
    ``opentelemetry-instrumentation-django``), around one step whose store method is
    ``operation``: the block hands what the step returned to the function it gets, which
    records the outcome and returns it; an exception marks the span as an error."""
    operation = operation.strip("_").removesuffix("_in_transaction")
    with tracer.start_as_current_span(
        f"idempotency.{name}",
        kind=SpanKind.INTERNAL,
        attributes=attributes(owner),
        record_exception=False,  # an exception's message may quote the key
        set_status_on_exception=False,
    ) as span:
        if name == "claim":
            span.set_attribute("idempotency.operation", operation)

        def done(result: T) -> T:
            span.set_attribute(OUTCOME, outcome(name, operation, result))
            return result

        try:
            yield done
        except BaseException as exc:
            unavailable = isinstance(exc, StoreUnavailable)
            span.set_attribute(OUTCOME, "store_unavailable" if unavailable else "error")
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR))
            raise


def _receiver(name: str) -> Callable[..., None]:
    def receive(sender: Any, **kwargs: Any) -> None:
        if not idempotency_settings.OPENTELEMETRY:
            return
        store = store_name(sender, kwargs)
        route = kwargs.get("route") or "-"
        OUTCOMES.add(1, {OUTCOME: name, STORE: store, "http.route": route})
        seconds = kwargs.get("claim_seconds")
        if isinstance(seconds, float):
            CLAIM_DURATION.record(seconds, {STORE: store})

    return receive


_RECEIVERS = {name: _receiver(name) for name in signals.OUTCOMES}


def connect() -> None:
    """Connect the metric receivers (idempotent; done by the app once the setting is on)."""
    for name, receive in _RECEIVERS.items():
        signals.OUTCOMES[name].connect(receive, dispatch_uid=f"idempotency.contrib.otel.{name}")


__all__ = ["CLAIM_DURATION", "OUTCOMES", "attributes", "connect", "outcome", "spanned"]
