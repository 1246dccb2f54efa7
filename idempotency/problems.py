"""RFC 9457 problem details: the one JSON shape every error of the library takes."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse

from idempotency.conf import idempotency_settings

PROBLEM_CONTENT_TYPE = "application/problem+json"


def render_problem(body: dict[str, Any]) -> bytes:
    """The bytes of a problem document: compact JSON, non-ASCII escaped.

    The same rendering as DRF's ``JSONRenderer`` with ``COMPACT_JSON`` (its default)
    and ``UNICODE_JSON = False``, so a project whose DRF errors are problem details
    too answers every error in one style.
    """
    return json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode()


def problem_body(status: int, code: str, title: str, detail: str, **extra: Any) -> dict[str, Any]:
    """The problem document: ``type``/``code`` are stable, ``detail`` is for humans."""
    body: dict[str, Any] = {
        "type": f"{idempotency_settings.PROBLEM_TYPE_BASE}{code}",
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
    }
    body.update(extra)
    return body


def problem_response(
    status: int,
    code: str,
    title: str,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> HttpResponse:
    """An ``application/problem+json`` response, rendered and ready to return from any view.

    Args:
        status: The HTTP status.
        code: The stable machine-readable code; ``type`` is ``PROBLEM_TYPE_BASE`` + code.
        title: The stable human title of the problem.
        detail: This occurrence, for humans.
        headers: Response headers to add (``Retry-After``).
        **extra: More members of the problem document.
    """
    content = render_problem(problem_body(status, code, title, detail, **extra))
    response = HttpResponse(content, status=status, content_type=PROBLEM_CONTENT_TYPE)
    for name, value in (headers or {}).items():
        response[name] = value
    return response
