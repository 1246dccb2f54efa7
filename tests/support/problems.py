"""Assertions about RFC 9457 problem responses."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse


def assert_problem(response: HttpResponse, status: int, code: str) -> dict[str, Any]:
    """Assert an ``application/problem+json`` answer with ``status`` and ``code``; its body."""
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/problem+json")
    body: dict[str, Any] = json.loads(response.content)
    assert body["status"] == status
    assert body["code"] == code, body
    assert body["type"].endswith(code)
    assert body["title"]
    assert isinstance(body["detail"], str)
    return body


def problem(response: HttpResponse) -> dict[str, Any]:
    """The body of an ``application/problem+json`` answer, with RFC 9457's members and the
    response's own status."""
    assert response["Content-Type"].startswith("application/problem+json"), response.content
    body: dict[str, Any] = json.loads(response.content)
    assert {"type", "title", "status", "detail", "code"} <= set(body), body
    assert body["status"] == response.status_code
    return body
