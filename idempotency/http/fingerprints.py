"""Request fingerprints: what makes two requests with one key "the same request".

The fingerprint is a SHA-256 over the method, the path, the query string
(sorted), the media type (without parameters), the canonical body and any
configured headers. A key reused with a different fingerprint is refused with
422.

The body is read from its raw bytes for every method (Django parses forms only
for POST, so a PUT form must not look empty). Reading ``request.body`` caches
it, so the view and DRF can still read it afterwards. Canonical forms: JSON
with sorted keys (at most :data:`MAX_JSON_DEPTH` levels deep; deeper bodies
hash as raw bytes), form fields sorted, multipart with its random boundary
replaced, raw bytes otherwise. When something parsed the body before the
fingerprint could read it (a POST form parsed by ``CsrfViewMiddleware``, or a
DRF authentication class reading ``request.data`` on DRF < 3.16), the parsed
data is hashed instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable
from itertools import accumulate
from typing import Any
from urllib.parse import parse_qsl

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from django.http.request import RawPostDataException

from idempotency.conf import idempotency_settings
from idempotency.http.keys import header_value

#: Deepest JSON nesting canonicalised; deeper bodies are fingerprinted as raw bytes.
MAX_JSON_DEPTH = 200

FORM_TYPE = "application/x-www-form-urlencoded"
MULTIPART_TYPE = "multipart/form-data"

_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def media_type(request: HttpRequest) -> str:
    """The request's media type, lower-cased, without parameters (``charset``, ``boundary``)."""
    return str(request.META.get("CONTENT_TYPE", "")).split(";", 1)[0].strip().lower()


def is_json(content_type: str) -> bool:
    return content_type == "application/json" or content_type.endswith("+json")


def json_depth(body: bytes) -> int:
    """The deepest nesting of ``[``/``{`` in a JSON text (an upper bound: brackets inside
    strings count too, which only ever errs towards "too deep")."""
    brackets = body.translate(None, _BRACKETS)
    return max(accumulate(_DEPTH_STEP[b] for b in brackets), default=0)


def _canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _boundary(request: HttpRequest) -> bytes:
    for param in str(request.META.get("CONTENT_TYPE", "")).split(";")[1:]:
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "boundary":
            return value.strip().strip('"').encode("latin-1", "replace")
    return b""


def canonical_bytes(content_type: str, body: bytes, boundary: bytes = b"") -> bytes:
    """The canonical form of a raw body of ``content_type``."""
    if not body:
        return b""
    if is_json(content_type):
        openers = body.count(b"[") + body.count(b"{")  # in C: most bodies stop here
        if openers > MAX_JSON_DEPTH and json_depth(body) > MAX_JSON_DEPTH:
            return b"raw:" + body
        try:
            return b"json:" + _canonical_json(json.loads(body))
        except (ValueError, RecursionError):
            return b"raw:" + body
    if content_type == FORM_TYPE:
        try:
            pairs = parse_qsl(body.decode(), keep_blank_values=True)
        except (UnicodeDecodeError, ValueError):
            return b"raw:" + body
        return b"form:" + _canonical_json(sorted(pairs))
    if content_type == MULTIPART_TYPE and boundary:
        # the parts between the delimiters, in sorted order: the boundary and part order
        # (both chosen by the client library) do not matter, every byte of a part does
        pieces = body.split(b"--" + boundary)
        if len(pieces) > 2:
            parts = sorted(hashlib.sha256(part).hexdigest() for part in pieces[1:-1])
            ends = [hashlib.sha256(pieces[0]).hexdigest(), hashlib.sha256(pieces[-1]).hexdigest()]
            return b"multipart:" + _canonical_json([parts, ends])
    return b"raw:" + body


def _parsed_body(request: Any) -> bytes:
    """The body once something else consumed the stream: hash what it parsed."""
    digest = hashlib.sha256()
    try:
        data = getattr(request, "data", None)  # a DRF Request
        if data is None:
            data = request.POST
    except Exception:  # the parser refused the body: the view answers that (a 4xx)
        return b"unparsable"
    if hasattr(data, "lists"):
        for name, values in sorted(data.lists()):
            for value in values:
                if hasattr(value, "chunks"):
                    continue  # uploads: hashed from FILES below
                digest.update(f"{name}={value}\x00".encode())
    else:
        try:
            digest.update(_canonical_json(data))
        except (TypeError, ValueError, RecursionError):
            digest.update(repr(type(data)).encode())
    files_by_name = getattr(request, "FILES", None)
    for name, files in sorted(files_by_name.lists() if files_by_name is not None else ()):
        for upload in files:
            digest.update(f"{name}:{upload.name}:{upload.size}\x00".encode())
            for chunk in upload.chunks():
                digest.update(chunk)
            upload.seek(0)
    return b"parsed:" + digest.digest()


def canonical_body(request: HttpRequest) -> bytes:
    """The body in a form that ignores key order, spacing and multipart boundaries."""
    try:
        body = request.body
    except RawPostDataException:
        return _parsed_body(request)
    return canonical_bytes(media_type(request), body, _boundary(request))


def request_fingerprint(request: HttpRequest, headers: Iterable[str] = ()) -> str:
    """SHA-256 hex digest of method + path + sorted query + media type + canonical body
    (+ the configured headers)."""
    digest = hashlib.sha256()
    digest.update(request.method.encode() if request.method else b"")
    digest.update(b"\x00")
    digest.update(request.path.encode())
    digest.update(b"\x00")
    query = request.META.get("QUERY_STRING", "")
    if query:
        digest.update(json.dumps(sorted(parse_qsl(query, keep_blank_values=True))).encode())
    digest.update(b"\x00")
    digest.update(media_type(request).encode("latin-1", "replace"))
    digest.update(b"\x00")
    digest.update(canonical_body(request))
    for name in headers:
        digest.update(b"\x00")
        digest.update(name.lower().encode())
        digest.update(b":")
        digest.update(str(request.headers.get(name, "")).encode())
    return digest.hexdigest()


def keep_body(request: HttpRequest) -> None:
    """Read (and so cache) the raw body of a keyed request before anything parses it.

    Django's multipart parser and DRF < 3.16 consume the stream, after which
    ``request.body`` raises; once cached, both read the cached bytes instead.
    """
    if header_value(request, idempotency_settings.HEADER) is None:
        return
    with contextlib.suppress(RawPostDataException, RequestDataTooBig):
        request.body  # noqa: B018 - the read caches it
