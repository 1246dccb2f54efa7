"""Capture a response for storage and rebuild it for replay, byte for byte."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse

from idempotency.conf import idempotency_settings, on_reload
from idempotency.exceptions import ResponseNotStored
from idempotency.stores.base import StoredResponse

REPLAYED_HEADER = "Idempotent-Replayed"

#: Response headers that are never stored nor replayed, whatever REPLAY_HEADERS says.
NEVER_REPLAYED = frozenset(
    {
        "set-cookie",
        "set-cookie2",
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)

#: Statuses that never get stored by default: the client should retry them.
TRANSIENT_4XX = frozenset({401, 403, 407, 408, 409, 425, 429})
#: Never stored, whatever a view asks: authentication failures.
NEVER_STORED = frozenset({401, 403, 407})


def retry_after(remaining: float, lease: float) -> int:
    """The ``Retry-After`` of a 409 for a request in progress: when its answer is likely
    ready, not when its lease ends. ``RETRY_AFTER`` while the claim is young, growing
    with the claim's age (a quarter of it: a request that has run long will likely run a
    while longer), never past the remaining lease, and at least 1 second. The age is
    the part of the lease already used, ``lease - remaining``."""
    seconds = float(idempotency_settings.RETRY_AFTER)
    if remaining > 0:
        age = max(0.0, lease - remaining)
        seconds = min(max(seconds, age / 4), remaining)
    return max(1, math.ceil(seconds))


def is_storable(status: int, *, store_errors: bool) -> bool:
    """Whether a response with ``status`` is kept for replay or its key released."""
    if status in NEVER_STORED:
        return False
    if store_errors:
        return True
    return status < 500 and status not in TRANSIENT_4XX


_replay_headers: frozenset[str] | None = None


def replay_headers() -> frozenset[str]:
    """Lower-cased names of the response headers kept for replay: Content-Type and Vary
    always (the view's Vary; outer middleware patch theirs into the replay as they did
    into the first response)."""
    global _replay_headers
    if _replay_headers is None:
        names = {h.lower() for h in idempotency_settings.REPLAY_HEADERS} - NEVER_REPLAYED
        _replay_headers = frozenset({"content-type", "vary", *names})
    return _replay_headers


@on_reload
def _forget_replay_headers() -> None:
    global _replay_headers
    _replay_headers = None


#: Headers that describe a body: a response kept status-only stores none of them.
_BODY_HEADERS = frozenset({"content-type", "content-disposition", "content-language"})
#: What a redacted field's value is replaced with.
REDACTED = "[redacted]"


def no_store(response: HttpResponseBase) -> bool:
    """Whether ``response`` says ``Cache-Control: no-store`` (RFC 9111 5.2.2.5): then its
    body is not stored; its key replays the status only."""
    value = response.get("Cache-Control")
    if not value:
        return False
    return any(part.split("=", 1)[0].strip().lower() == "no-store" for part in value.split(","))


def kept(
    response: HttpResponseBase,
    *,
    limit: int | None,
    status_only: bool,
    redact: Collection[str],
) -> StoredResponse:
    """What is stored of ``response``: its status only (``status_only``, or the response
    says ``Cache-Control: no-store``), else :func:`capture` with ``redact``'s fields
    redacted."""
    if status_only or no_store(response):
        # a streaming body is left unread
        return _status_only(StoredResponse(response.status_code, _kept_headers(response), b""))
    stored = capture(response, limit=limit)
    return redacted(stored, redact) if redact else stored


async def akept(
    response: HttpResponseBase,
    *,
    limit: int | None,
    status_only: bool,
    redact: Collection[str],
) -> StoredResponse:
    """:func:`kept` for async views, which may return async streams: read here."""
    if status_only or no_store(response) or not isinstance(response, StreamingHttpResponse):
        return kept(response, limit=limit, status_only=status_only, redact=redact)
    content = response.streaming_content
    if not isinstance(content, AsyncIterator):  # a sync stream: kept() reads it
        return kept(response, limit=limit, status_only=status_only, redact=redact)
    chunks: list[bytes] = []
    size = 0
    async for chunk in content:
        chunks.append(bytes(chunk))
        size += len(chunk)
        if limit is not None and size > limit:
            response.streaming_content = _achain(chunks, content)
            return not_stored(response.status_code, size=None, limit=limit)
    response.streaming_content = _achain(chunks, None)
    stored = StoredResponse(response.status_code, _kept_headers(response), b"".join(chunks))
    return redacted(stored, redact) if redact else stored


def redacted(stored: StoredResponse, fields: Collection[str]) -> StoredResponse:
    """``stored`` with the values of the JSON members named ``fields`` (at any depth)
    replaced by ``"[redacted]"``; unchanged (byte for byte) when none is present. A body
    that is not JSON, or does not parse, could hold them unseen: it is kept status-only."""
    if not stored.body:
        return stored
    content_type = next((v for n, v in stored.headers if n.lower() == "content-type"), "")
    media = content_type.split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        return _status_only(stored)
    try:
        data = json.loads(stored.body)
    except ValueError:
        return _status_only(stored)
    found, clean = _redact(data, frozenset(fields))
    if not found:
        return stored
    return stored._replace(body=json.dumps(clean, ensure_ascii=False).encode())


def _status_only(stored: StoredResponse) -> StoredResponse:
    """``stored`` without its body, nor the headers that describe one."""
    headers = [(n, v) for n, v in stored.headers if n.lower() not in _BODY_HEADERS]
    return StoredResponse(stored.status, headers, b"")


def _redact(value: Any, fields: frozenset[str]) -> tuple[bool, Any]:
    """Whether ``value`` holds a member named in ``fields``, and ``value`` redacted."""
    if isinstance(value, dict):
        found = False
        clean: dict[str, Any] = {}
        for name, item in value.items():
            if name in fields:
                found = True
                clean[name] = REDACTED
            else:
                inner, clean[name] = _redact(item, fields)
                found = found or inner
        return found, clean
    if isinstance(value, list):
        results = [_redact(item, fields) for item in value]
        return any(r[0] for r in results), [r[1] for r in results]
    return False, value


def capture(response: HttpResponseBase, *, limit: int | None = None) -> StoredResponse:
    """The storable form of a rendered response.

    A streaming response is read into memory up to ``limit`` bytes and handed back to
    the client unchanged (its content is re-attached, already read or not). A body over
    ``limit`` bytes, or an async stream that a sync caller cannot read, is stored as a
    410 ``idempotency-response-not-stored`` problem instead (:func:`not_stored`): the
    request ran and its effects stay, but repeats cannot replay what it answered.
    """
    if not isinstance(response, HttpResponse):  # a StreamingHttpResponse (or alike)
        return _capture_stream(response, limit)
    render = getattr(response, "render", None)
    if callable(render) and not getattr(response, "is_rendered", True):
        render()
    content = response.content
    if limit is not None and len(content) > limit:
        return not_stored(response.status_code, size=len(content), limit=limit)
    return StoredResponse(response.status_code, _kept_headers(response), content)


async def _achain(chunks: list[bytes], rest: AsyncIterator[Any] | None) -> Any:
    for chunk in chunks:
        yield chunk
    if rest is not None:
        async for chunk in rest:
            yield chunk


def _capture_stream(response: Any, limit: int | None) -> StoredResponse:
    if getattr(response, "is_async", False):
        # an async iterator cannot be read from sync code; the client still gets it whole
        return not_stored(response.status_code, size=None, limit=limit)
    chunks: list[bytes] = []
    size = 0
    iterator = iter(response.streaming_content)
    for chunk in iterator:
        chunks.append(bytes(chunk))
        size += len(chunk)
        if limit is not None and size > limit:
            response.streaming_content = itertools.chain(chunks, iterator)
            return not_stored(response.status_code, size=None, limit=limit)
    response.streaming_content = chunks
    return StoredResponse(response.status_code, _kept_headers(response), b"".join(chunks))


def _kept_headers(response: HttpResponseBase) -> list[tuple[str, str]]:
    allowed = replay_headers()
    return [(name, value) for name, value in response.items() if name.lower() in allowed]


def not_stored(status: int, *, size: int | None, limit: int | None) -> StoredResponse:
    """What a key whose response could not be stored replays: a 410 problem naming the
    original status, so a retry learns the request completed and does not run it again."""

    how_big = f"{size} bytes" if size is not None else "a stream"
    reason = (
        f"its response ({how_big}) was larger than the {limit} bytes the server stores"
        if limit is not None
        else "its response was an async stream, which cannot be stored"
    )
    problem = ResponseNotStored(
        f"The request with this idempotency key already completed with status {status}, "
        f"but {reason}, so it cannot be replayed. It will not run again.",
        original_status=status,
    ).as_response()
    return StoredResponse(problem.status_code, _kept_headers(problem), problem.content)


class UnreplayableResponse(ValueError):
    """A stored response no record of this library holds: a status it never stores, or
    a header value no response can carry. The record is forged or damaged: it is
    answered ``idempotency-record-unreadable`` and nothing runs."""


def replayable_status(status: object) -> bool:
    """Whether a stored ``status`` may be replayed: a final status (200 to 599) other
    than the ones never stored (401, 403, 407). Redirects are (a form's POST answered
    303, replayed with its ``Location``), informational statuses and numbers no HTTP
    status has are not."""
    return isinstance(status, int) and 200 <= status <= 599 and status not in NEVER_STORED


def replay(
    stored: StoredResponse, *, dropped: Callable[[list[str]], None] | None = None
) -> HttpResponse:
    """A fresh response equal to the stored one, marked ``Idempotent-Replayed: true``.

    What a store hands back is checked as it is read, whatever wrote it: the status must
    be :func:`replayable_status`, and only the headers :func:`replay_headers` names
    today are replayed (never ``Set-Cookie`` nor a hop-by-hop header, which a record of
    this library never holds: ``dropped`` is called with their names), each name once. A
    record that fails raises :class:`UnreplayableResponse`."""
    status = stored.status
    if not replayable_status(status):
        raise UnreplayableResponse(f"its status {status!r} is never stored")
    allowed = replay_headers()
    headers: list[tuple[str, str]] = []
    names: set[str] = set()
    planted: list[str] = []
    for name, value in stored.headers:
        lower = name.lower()
        if lower in allowed:
            if lower in names:
                # a response has one value per header name (Django's own): never stored twice
                raise UnreplayableResponse("it holds a header twice")
            names.add(lower)
            headers.append((name, value))
        elif lower in NEVER_REPLAYED:
            planted.append(name)
    if planted and dropped is not None:
        dropped(planted)
    headers.append((REPLAYED_HEADER, "true"))
    # the headers go in with the response: each is checked once, as Django checks them
    try:
        response = HttpResponse(stored.body, status=status, headers=headers)
    except ValueError as exc:  # a value with a line break (BadHeaderError)
        # named, not quoted: the value is whatever was planted
        raise UnreplayableResponse(f"a header cannot be sent ({type(exc).__name__})") from exc
    if "content-type" not in names:
        del response["Content-Type"]  # Django's default: the first response had none
    return response
