"""Request fingerprints: what makes two requests with one key "the same request".

The fingerprint is a SHA-256 over the method, the path, the query string
(sorted), the canonical body (JSON with sorted keys, form fields sorted, raw
bytes otherwise) and any configured headers. A key reused with a different
fingerprint is refused with 422.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from urllib.parse import parse_qsl

from django.http import HttpRequest

JSON_TYPES = ("application/json",)


def _content_type(request: HttpRequest) -> str:
    return str(request.META.get("CONTENT_TYPE", "")).split(";", 1)[0].strip().lower()


def canonical_body(request: HttpRequest) -> bytes:
    """The body in a form that ignores key order and multipart boundaries."""
    content_type = _content_type(request)
    if content_type == "multipart/form-data":
        digest = hashlib.sha256()
        for name, values in sorted(request.POST.lists()):
            for value in values:
                digest.update(f"{name}={value}\x00".encode())
        for name, files in sorted(request.FILES.lists()):
            for upload in files:
                digest.update(f"{name}:{upload.name}:{upload.size}\x00".encode())
                for chunk in upload.chunks():
                    digest.update(chunk)
                upload.seek(0)
        return b"multipart:" + digest.digest()
    body = request.body
    if not body:
        return b""
    if content_type in JSON_TYPES or content_type.endswith("+json"):
        try:
            parsed = json.loads(body)
        except ValueError:
            return body
        return json.dumps(
            parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
    if content_type == "application/x-www-form-urlencoded":
        try:
            pairs = parse_qsl(body.decode(), keep_blank_values=True)
        except UnicodeDecodeError:
            return body
        return json.dumps(sorted(pairs), separators=(",", ":")).encode()
    return body


def request_fingerprint(request: HttpRequest, headers: Iterable[str] = ()) -> str:
    """SHA-256 hex digest of method + path + sorted query + canonical body (+ headers)."""
    digest = hashlib.sha256()
    digest.update(request.method.encode() if request.method else b"")
    digest.update(b"\x00")
    digest.update(request.path.encode())
    digest.update(b"\x00")
    query = request.META.get("QUERY_STRING", "")
    if query:
        digest.update(json.dumps(sorted(parse_qsl(query, keep_blank_values=True))).encode())
    digest.update(b"\x00")
    digest.update(canonical_body(request))
    for name in headers:
        digest.update(b"\x00")
        digest.update(name.lower().encode())
        digest.update(b":")
        digest.update(str(request.headers.get(name, "")).encode())
    return digest.hexdigest()
