"""The gate to OpenTelemetry: :func:`step` runs one step of a keyed request or call (a
store call, a replay) inside a span when ``IDEMPOTENCY["OPENTELEMETRY"]`` is on, and
plainly otherwise, where it costs one settings read and ``opentelemetry`` is never
imported (the spans themselves: :mod:`idempotency.observability.otel`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
    ``call`` returns (:func:`idempotency.observability.otel.outcome`)."""
    if not idempotency_settings.OPENTELEMETRY:
        return call(*args, **kwargs)
    with spanned(name, owner, getattr(call, "__name__", name)) as done:
        return done(call(*args, **kwargs))


@contextmanager
def spanned(name: str, owner: Keyed, operation: str) -> Iterator[Callable[[T], T]]:
    """The span of one step (:func:`idempotency.observability.otel.spanned`) when tracing
    is on; else a block whose recorder returns what it is given."""
    if not idempotency_settings.OPENTELEMETRY:
        yield _as_is
        return
    from idempotency.observability.otel import spanned as otel_spanned

    with otel_spanned(name, owner, operation) as done:
        yield done


def _as_is(result: T) -> T:
    return result


__all__ = ["Keyed", "spanned", "step"]
