"""Spans rendered as text: the example trace of docs/howto/opentelemetry.md."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

#: The request span's attributes worth showing (the rest are the client's address etc.)
REQUEST_ATTRIBUTES = ("http.route", "http.response.status_code", "http.status_code")


def render(spans: Sequence[ReadableSpan]) -> str:
    """Each request span, then its children indented, with their attributes: the
    request's route and status, every ``idempotency.*`` attribute of the others."""
    by_parent: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        if span.parent is not None:
            by_parent.setdefault(span.parent.span_id, []).append(span)
    lines: list[str] = []
    for request in (span for span in spans if span.kind is SpanKind.SERVER):
        shown = {k: v for k, v in (request.attributes or {}).items() if k in REQUEST_ATTRIBUTES}
        lines.append(f"{request.name}  " + "  ".join(f"{k}={v}" for k, v in shown.items()))
        children = sorted(
            by_parent.get(request.context.span_id, []), key=lambda s: s.start_time or 0
        )
        for number, child in enumerate(children, 1):
            branch = "└─" if number == len(children) else "├─"
            stem = "  " if number == len(children) else "│ "
            lines.append(f"{branch} {child.name}")
            attributes = sorted((child.attributes or {}).items())
            lines += [f"{stem}    {k} = {v}" for k, v in attributes]
    return "\n".join(lines) + "\n"
