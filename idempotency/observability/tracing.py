"""The engine's hook for tracing: :func:`spanned` runs one step of a keyed request or call
(a store call, a replay) inside the span of the tracer an integration registered with
:func:`register` (:mod:`idempotency.contrib.otel` does, in its ``ready()``), when
``IDEMPOTENCY["OPENTELEMETRY"]`` is on; plainly otherwise. The engine imports this hook,
never the integration."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol, TypeVar

from idempotency.conf import idempotency_settings

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


#: ``spans(name, owner, operation)``: a block around one step that yields the function
#: the step's result is handed to (it records the outcome and returns the result).
Spans = Callable[[str, Keyed, str], AbstractContextManager[Callable[[Any], Any]]]

_spans: list[Spans] = []


def register(spans: Spans) -> None:
    """Make ``spans`` the tracer of every step (the last one registered wins)."""
    _spans[:] = [spans]


@contextmanager
def spanned(name: str, owner: Keyed, operation: str) -> Iterator[Callable[[T], T]]:
    """The span ``idempotency.<name>`` of one step whose store method is ``operation``,
    from the registered tracer, when tracing is on; else a block whose recorder returns
    what it is given."""
    if not idempotency_settings.OPENTELEMETRY or not _spans:
        yield _as_is
        return
    with _spans[0](name, owner, operation) as done:
        yield done


def _as_is(result: T) -> T:
    return result


__all__ = ["Keyed", "Spans", "register", "spanned"]
