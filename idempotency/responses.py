"""Capture a response for storage and rebuild it for replay, byte for byte."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse

from idempotency.conf import idempotency_settings, on_reload

REPLAYED_HEADER = "Idempotent-Replayed"

#: Statuses that never get stored by default: the client should retry them.
TRANSIENT_4XX = frozenset({401, 403, 407, 408, 409, 425, 429})
#: Never stored, whatever a view asks: authentication failures.
NEVER_STORED = frozenset({401, 403, 407})


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """What replay needs: status, allow-listed headers and the exact body bytes."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def headers_json(self) -> str:
        return json.dumps(self.headers)

    @classmethod
    def from_parts(
        cls, status: int, headers: Any, body: bytes | memoryview | None
    ) -> StoredResponse:
        if isinstance(headers, str):
            headers = json.loads(headers)
        return cls(
            status=int(status),
            headers=[(str(k), str(v)) for k, v in (headers or [])],
            body=bytes(body or b""),
        )


def is_storable(status: int, *, store_errors: bool) -> bool:
    """Whether a response with ``status`` is kept for replay or its key released."""
    if status in NEVER_STORED:
        return False
    if store_errors:
        return True
    return status < 500 and status not in TRANSIENT_4XX


_replay_headers: frozenset[str] | None = None


def replay_headers() -> frozenset[str]:
    """Lower-cased names of the response headers kept for replay (Content-Type always)."""
    global _replay_headers
    if _replay_headers is None:
        names = {h.lower() for h in idempotency_settings.REPLAY_HEADERS}
        _replay_headers = frozenset({"content-type", *names})
    return _replay_headers


@on_reload
def _forget_replay_headers() -> None:
    global _replay_headers
    _replay_headers = None


def capture(response: HttpResponseBase) -> StoredResponse | None:
    """The storable form of a rendered response, or None when it cannot be stored (streaming)."""
    if isinstance(response, StreamingHttpResponse) or getattr(response, "streaming", False):
        return None
    render = getattr(response, "render", None)
    if callable(render) and not getattr(response, "is_rendered", True):
        render()
    allowed = replay_headers()
    headers = [(name, value) for name, value in response.items() if name.lower() in allowed]
    content: bytes = response.content  # type: ignore[attr-defined]
    return StoredResponse(status=response.status_code, headers=headers, body=content)


def replay(stored: StoredResponse) -> HttpResponse:
    """A fresh response equal to the stored one, marked ``Idempotent-Replayed: true``."""
    response = HttpResponse(stored.body, status=stored.status)
    has_type = False
    for name, value in stored.headers:
        if name.lower() == "content-type":
            has_type = True
        response[name] = value
    if not has_type:
        del response["Content-Type"]
    response[REPLAYED_HEADER] = "true"
    return response
