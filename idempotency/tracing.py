"""The gate to OpenTelemetry: :func:`step` runs one step of a keyed request or call (a
store call, a replay) inside a span when ``IDEMPOTENCY["OPENTELEMETRY"]`` is on, and
plainly otherwise, where it costs one settings read and ``opentelemetry`` is never
imported (the spans themselves: :mod:`idempotency.otel`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar

from idempotency.conf import idempotency_settings

P = ParamSpec("P")
T = TypeVar("T")


class Keyed(Protocol):
    """What a span says of the request or call it belongs to (never its scope or key)."""

    @property
    def store(self) -> Any: ...

    @property
    def key(self) -> str: ...

    @property
    def mode(self) -> str: ...

    @property
    def scope_kind(self) -> str:
        """A bounded label of whose keys these are: ``user``, ``shared``, ``custom``, ..."""

    @property
    def interface(self) -> str:
        """``http``, ``function`` or ``task``."""


def step(name: str, owner: Keyed, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``call(*args, **kwargs)``, in the span ``idempotency.<name>`` when tracing is on.

    ``name`` is ``claim`` (a store call that decides who owns the key: a look-up or the
    claim), ``replay``, ``complete`` or ``release``; the span's outcome is read from what
    ``call`` returns (:func:`idempotency.otel.outcome`)."""
    if not idempotency_settings.OPENTELEMETRY:
        return call(*args, **kwargs)
    from idempotency.otel import traced

    return traced(name, owner, call, *args, **kwargs)


__all__ = ["Keyed", "step"]
