"""One keyed JSON request, as most HTTP tests send it."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.test import Client

H = "HTTP_IDEMPOTENCY_KEY"


def new_key() -> str:
    return str(uuid.uuid4())


def post(client: Client, url: str, body: Any = None, key: str | None = None, **extra: Any) -> Any:
    """``POST`` ``body`` (``{"amount": 5}`` by default) as JSON, with ``key`` if given; a
    ``str`` or ``bytes`` body is sent as it is (malformed JSON, exact bytes)."""
    if key is not None:
        extra[H] = key
    data = body if isinstance(body, str | bytes) else json.dumps(body or {"amount": 5})
    return client.post(url, data=data, content_type="application/json", **extra)


def multipart(boundary: str, parts: list[tuple[str, str]]) -> bytes:
    """A ``multipart/form-data`` body of ``(name, value)`` fields; lone surrogates are kept
    as they are (``surrogatepass``), for the fuzzers' odd text."""
    lines: list[str] = []
    for name, value in parts:
        lines += [f"--{boundary}", f'Content-Disposition: form-data; name="{name}"', "", value]
    lines.append(f"--{boundary}--")
    return ("\r\n".join(lines) + "\r\n").encode("utf-8", "surrogatepass")
