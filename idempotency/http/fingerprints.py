"""Request fingerprints: what makes two requests with one key "the same request".

The fingerprint is an HMAC-SHA256, under a server secret (:mod:`idempotency.utils.hashing`), of
the SHA-256 digest of the method, the path, the query string, the media type (its
parameters aside, but for the charset the body is decoded by when that is not UTF-8:
see :func:`body_charset`), the canonical body and any configured headers. A key reused with a
different fingerprint is refused with 422. Keyed, a stored fingerprint gives no
brute-force oracle on the body (a short secret such as a CVV). A record stored under an
older secret, or unkeyed (``FINGERPRINT_ACCEPT_UNKEYED``), still matches its retry
(:func:`older_request_fingerprints`).

Canonical forms keep what distinguishes two requests and drop what only spells one
differently:

* query strings and form fields (urlencoded or multipart) are ordered by name, and
  the values of a repeated name keep their order (``item=1&item=2`` is not
  ``item=2&item=1``), as do several files under one name;
* JSON objects have sorted keys; numbers are hashed from their exact text
  (``12345678901234567.1`` is not ``.2``); at most :data:`MAX_JSON_DEPTH` levels deep
  (deeper bodies hash as raw bytes). Two different JSON values never share a canonical
  form (a number is written under a key no escaped JSON key can spell, :data:`NUMBER_KEY`);
* multipart bodies are read through Django's upload handlers, so an upload of any size
  is hashed as the handlers write it (to disk past ``FILE_UPLOAD_MAX_MEMORY_SIZE``);
  a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is never held in memory, and the random
  boundary does not matter;
* other bodies are their raw bytes.

``csrfmiddlewaretoken`` (masked anew on every rendering of a form) and the names in
``FINGERPRINT_EXCLUDE`` are left out of query strings, form fields and top-level JSON
object keys. The body is read from its raw bytes for every method (Django parses forms
only for POST); reading ``request.body`` caches it for the view. Where something parsed
the body first (DRF authentication reading ``request.data``), the parsed data is hashed.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import hashlib
import io
import json
from collections.abc import Iterable
from decimal import Decimal
from itertools import accumulate
from typing import Any
from urllib.parse import parse_qsl

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest
from django.http.request import RawPostDataException

from idempotency.conf import idempotency_settings, on_reload
from idempotency.http import views
from idempotency.http.requests import header_value
from idempotency.utils.hashing import (
    fingerprint_end,
    fingerprint_start,
    older_streamed_fingerprints,
)
from idempotency.utils.json_codec import decoder_of, dumps, encoder_of

#: Deepest JSON nesting canonicalised; deeper bodies are fingerprinted as raw bytes.
MAX_JSON_DEPTH = 200

FORM_TYPE = "application/x-www-form-urlencoded"
MULTIPART_TYPE = "multipart/form-data"
#: The field Django's ``{% csrf_token %}`` adds: masked anew on every rendering.
CSRF_FIELD = "csrfmiddlewaretoken"

_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def media_type(request: HttpRequest) -> str:
    """The request's media type, lower-cased, without parameters (``charset``, ``boundary``)."""
    return str(request.META.get("CONTENT_TYPE", "")).split(";", 1)[0].strip().lower()


def body_charset(request: HttpRequest) -> str:
    """The charset the body is decoded by, by its ``codecs`` name, ``""`` for UTF-8: the
    Content-Type's ``charset`` where Python knows it (Django's ``request.encoding``),
    else ``DEFAULT_CHARSET``, as Django's forms and DRF's parsers decode. Two requests
    with the same bytes in two charsets are two different requests (``a=%E9`` is ``é``
    in ISO-8859-1, not in UTF-8), so the charset is part of the fingerprint; UTF-8, the
    common case, adds nothing to it."""
    encoding = request.encoding
    if encoding:
        return _charset(encoding)
    global _default_charset
    if _default_charset is None:
        _default_charset = _charset(str(settings.DEFAULT_CHARSET))
    return _default_charset


_default_charset: str | None = None


@receiver(setting_changed)
def _forget_default_charset(*, setting: str, **kwargs: Any) -> None:
    global _default_charset
    if setting == "DEFAULT_CHARSET":
        _default_charset = None


@functools.lru_cache(maxsize=64)
def _charset(name: str) -> str:
    try:
        name = codecs.lookup(name).name
    except LookupError:  # a DEFAULT_CHARSET Python does not know: Django fails on it too
        name = name.lower()
    return "" if name == "utf-8" else name


def json_depth(body: bytes) -> int:
    """The deepest nesting of ``[``/``{`` in a JSON text (an upper bound: brackets inside
    strings count too, which only ever errs towards "too deep")."""
    brackets = body.translate(None, _BRACKETS)
    return max(accumulate(_DEPTH_STEP[b] for b in brackets), default=0)


_excluded: frozenset[str] | None = None


def excluded() -> frozenset[str]:
    """Names left out of the fingerprint: the CSRF field and ``FINGERPRINT_EXCLUDE``."""
    global _excluded
    if _excluded is None:
        _excluded = frozenset({CSRF_FIELD, *idempotency_settings.FINGERPRINT_EXCLUDE})
    return _excluded


@on_reload
def _forget_excluded() -> None:
    global _excluded
    _excluded = None


#: The key a JSON number is written under in the canonical form (see :func:`_exact`).
NUMBER_KEY = "\x00number"


def _exact(number: Decimal) -> dict[str, str]:
    # a JSON number, as the exact text it was sent as (a float would round it)
    return {NUMBER_KEY: str(number)}


def _escaped_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys starting with NUL get one more: no key of the body can then
    be :data:`NUMBER_KEY` (which starts with NUL and then not with NUL), and distinct
    keys stay distinct."""
    return {("\x00" + k if k[:1] == "\x00" else k): v for k, v in pairs}


_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_exact
)
_DECODER = json.JSONDecoder(parse_float=Decimal)
#: Bodies that spell a NUL (``\u0000``): their object keys are escaped (:func:`_escaped_keys`).
_ESCAPING_DECODER = json.JSONDecoder(parse_float=Decimal, object_pairs_hook=_escaped_keys)


_canonical_json = encoder_of(_ENCODER)
_decode = decoder_of(_DECODER)
_decode_escaping = decoder_of(_ESCAPING_DECODER)
#: First bytes after which ``json.detect_encoding`` can only answer UTF-8 (no BOM, and the
#: second byte, when there is one, is not the zero byte of UTF-16 or UTF-32).
_UTF8_OPENERS = frozenset(b"{[")


def _json(body: bytes, drop: frozenset[str]) -> bytes:
    # as json.loads(bytes) reads them: UTF-8, -16 or -32, a BOM allowed
    if body[0] in _UTF8_OPENERS and body[1:2] != b"\x00":
        text = body.decode("utf-8", "surrogatepass")
    else:
        text = body.decode(json.detect_encoding(body), "surrogatepass")
    # a NUL can only be spelled \u0000 in JSON text (raw control characters are refused):
    # without one, no key can start with NUL, and the plain decoder's keys are exact
    value = _decode_escaping(text) if "\\u0000" in text else _decode(text)
    if isinstance(value, dict) and not drop.isdisjoint(value):
        value = {k: v for k, v in value.items() if k not in drop}
    return _canonical_json(value).encode()


def _pairs(pairs: Iterable[tuple[str, str]], drop: frozenset[str]) -> list[tuple[str, str]]:
    """Name-value pairs ordered by name, the values of one name in their order."""
    return sorted((pair for pair in pairs if pair[0] not in drop), key=lambda pair: pair[0])


def canonical_bytes(content_type: str, body: bytes, drop: frozenset[str] = frozenset()) -> bytes:
    """The canonical form of a raw body of ``content_type`` (multipart aside: those are
    read through the upload handlers, see :func:`canonical_body`)."""
    if not body:
        return b""
    if content_type == "application/json" or content_type.endswith("+json"):
        openers = body.count(b"[") + body.count(b"{")
        if openers > MAX_JSON_DEPTH and json_depth(body) > MAX_JSON_DEPTH:
            return b"raw:" + body
        try:
            return b"json:" + _json(body, drop)
        except (ValueError, RecursionError):
            return b"raw:" + body
    if content_type == FORM_TYPE:
        try:
            pairs = parse_qsl(body.decode(), keep_blank_values=True)
        except (UnicodeDecodeError, ValueError):
            return b"raw:" + body
        return b"form:" + _canonical_json(_pairs(pairs, drop)).encode()
    return b"raw:" + body


def _parsed_digest(data: Any, files: Any, drop: frozenset[str]) -> bytes:
    """Fields by name (values in order) and uploads by name (in order), each upload's
    content hashed in chunks from wherever the upload handler put it."""
    digest = hashlib.sha256()
    if hasattr(data, "lists"):
        for name, values in sorted(data.lists(), key=lambda item: item[0]):
            if name in drop:
                continue
            for value in values:
                if not hasattr(value, "chunks"):  # uploads: hashed from files below
                    digest.update(dumps([name, str(value)]).encode() + b"\x00")
    else:
        try:
            digest.update(_canonical_json(data).encode())
        except (TypeError, ValueError, RecursionError):
            digest.update(repr(type(data)).encode())
    for name, uploads in sorted(files.lists() if files is not None else (), key=lambda i: i[0]):
        for upload in uploads:
            meta = [name, upload.name, getattr(upload, "content_type", ""), upload.size]
            digest.update(b"\x01" + dumps(meta).encode() + b"\x00")
            for chunk in upload.chunks():
                digest.update(chunk)
            upload.seek(0)
    return digest.digest()


def _parse_multipart(request: Any) -> tuple[Any, Any]:
    """POST and FILES of a multipart request, parsed once by Django's upload handlers
    (also for PUT/PATCH/DELETE, where Django itself would not; DRF then reuses them).

    A body within ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is read (and cached) first, so a view
    can still read ``request.body`` as it could without a key; a larger one is parsed
    straight from the stream (``request.body`` would refuse it anyway)."""
    django_request = getattr(request, "_request", request)
    if not django_request._read_started:
        with contextlib.suppress(RequestDataTooBig):
            django_request.body  # noqa: B018 - the read caches it
    if django_request.method != "POST" and not hasattr(django_request, "_post"):
        cached = getattr(django_request, "_body", None)
        stream = io.BytesIO(cached) if cached is not None else django_request
        django_request._post, django_request._files = django_request.parse_file_upload(
            django_request.META, stream
        )
    return django_request.POST, django_request.FILES


def _parsed_body(request: Any, drop: frozenset[str]) -> bytes:
    """The body of a multipart request, or of one whose stream something else consumed."""
    try:
        parsed = views.parsed_data(request)  # a DRF Request that parsed it
        if parsed is not None:
            data, files = parsed
        elif media_type(request) == MULTIPART_TYPE:
            data, files = _parse_multipart(request)
        else:
            data, files = request.POST, None
    except RequestDataTooBig:
        raise  # 413
    except Exception:  # noqa: BLE001 - the parser refused the body: the view answers it
        # two different malformed bodies are two requests: hash the raw bytes when they
        # were read into memory (a body over DATA_UPLOAD_MAX_MEMORY_SIZE was not)
        raw = getattr(getattr(request, "_request", request), "_body", None)
        return b"unparsable:" + (hashlib.sha256(raw).hexdigest().encode() if raw else b"")
    return b"parsed:" + _parsed_digest(data, files, drop)


def canonical_body(request: HttpRequest, content_type: str | None = None) -> bytes:
    """The body in a form that ignores key order, spacing and multipart boundaries
    (``content_type``: the request's :func:`media_type`, when the caller has it)."""
    drop = excluded()
    if content_type is None:
        content_type = media_type(request)
    if content_type == MULTIPART_TYPE:
        return _parsed_body(request, drop)
    try:
        body = getattr(request, "_request", request).body  # DRF's Request: its Django one
    except RawPostDataException:
        return _parsed_body(request, drop)
    return canonical_bytes(content_type, body, drop)


def request_fingerprint(request: HttpRequest, headers: Iterable[str] = ()) -> str:
    """The keyed fingerprint (64 hex digits): HMAC-SHA256, under a server secret, of the
    request's material (:func:`request_digest` is its unkeyed SHA-256)."""
    return fingerprint_end(_material(request, headers, fingerprint_start()))


def older_request_fingerprints(request: HttpRequest, headers: Iterable[str] = ()) -> list[str]:
    """What :func:`request_fingerprint` was under older secrets (rotation) and, while
    ``FINGERPRINT_ACCEPT_UNKEYED`` is on, before fingerprints were keyed: a record stored
    with one of them is this request's own."""
    return older_streamed_fingerprints(lambda state: _material(request, headers, state))


def request_digest(request: HttpRequest, headers: Iterable[str] = ()) -> bytes:
    """The unkeyed SHA-256 digest of the request's material (what an unkeyed record holds)."""
    return bytes(_material(request, headers, hashlib.sha256()).digest())


def _material(request: HttpRequest, headers: Iterable[str], digest: Any) -> Any:
    """Stream method + path + query + media type (and a charset other than UTF-8) +
    canonical body (+ the configured headers) into the SHA-256 state ``digest``, and
    return it."""
    plain: HttpRequest = getattr(request, "_request", request)  # DRF's Request wraps it
    content_type = media_type(plain)
    method, path = plain.method, plain.path
    digest.update(b"%s\x00%s\x00" % (method.encode() if method else b"", path.encode()))
    query = plain.META.get("QUERY_STRING", "")
    if query:
        pairs = _pairs(parse_qsl(query, keep_blank_values=True), excluded())
        digest.update(dumps(pairs).encode())
    charset = body_charset(plain)  # ";" never appears in the media type: no ambiguity
    media = f"{content_type};charset={charset}" if charset else content_type
    digest.update(b"\x00%s\x00" % media.encode("latin-1", "replace"))
    digest.update(canonical_body(request, content_type))
    for name in headers:
        digest.update(b"\x00")
        digest.update(name.lower().encode())
        digest.update(b":")
        digest.update(str(plain.headers.get(name, "")).encode())
    return digest


def keep_body(request: HttpRequest) -> None:
    """Read (and so cache) the raw body of a keyed request before anything parses it.

    Django's multipart parser and DRF < 3.16 consume the stream, after which
    ``request.body`` raises; once cached, both read the cached bytes instead. A body
    over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is left to the upload handlers.
    """
    if header_value(request, idempotency_settings.HEADER) is None:
        return
    with contextlib.suppress(RawPostDataException, RequestDataTooBig):
        request.body  # noqa: B018 - the read caches it
