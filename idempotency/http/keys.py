"""Parsing of the ``Idempotency-Key`` header (RFC 8941 sf-string or a bare token)."""

from __future__ import annotations

from django.http import HttpRequest

from idempotency.conf import MAX_KEY_LENGTH
from idempotency.exceptions import InvalidIdempotencyKey


def _printable(text: str) -> bool:
    """Only printable ASCII (0x20-0x7E): the string methods run in C, not per character."""
    return text.isascii() and text.isprintable()


def _unquote(value: str) -> str:
    """The content of an sf-string: ``"..."`` with ``\\"`` and ``\\\\`` escapes."""
    chars: list[str] = []
    i = 1
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value) or value[i + 1] not in '"\\':
                raise InvalidIdempotencyKey("The quoted Idempotency-Key has an invalid escape.")
            chars.append(value[i + 1])
            i += 2
            continue
        if ch == '"':
            rest = value[i + 1 :].strip(" \t")
            if rest.startswith(","):
                raise InvalidIdempotencyKey("Send exactly one Idempotency-Key header.")
            if rest:
                raise InvalidIdempotencyKey(
                    "The Idempotency-Key must be a single string, without parameters."
                )
            return "".join(chars)
        chars.append(ch)
        i += 1
    raise InvalidIdempotencyKey("The quoted Idempotency-Key is not terminated.")


def parse_key(raw: str | None) -> str | None:
    """The key carried by a header value, None when absent; raises on a malformed value.

    Accepts ``"abc"`` (RFC 8941 sf-string) and ``abc``. The key is 1 to 255
    printable ASCII characters. Servers join repeated headers with commas, so
    a comma outside quotes means the header was sent more than once.
    """
    if raw is None:
        return None
    value = raw.strip(" \t")
    if not _printable(value):
        raise InvalidIdempotencyKey("The Idempotency-Key must be printable ASCII.")
    if value.startswith('"'):
        key = _unquote(value)
    else:
        if "," in value:
            raise InvalidIdempotencyKey("Send exactly one Idempotency-Key header.")
        if '"' in value or "\\" in value:
            raise InvalidIdempotencyKey("The Idempotency-Key has stray quotes or backslashes.")
        key = value
    if not key:
        raise InvalidIdempotencyKey("The Idempotency-Key is empty.")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidIdempotencyKey(
            f"The Idempotency-Key is longer than {MAX_KEY_LENGTH} characters."
        )
    return key


def header_value(request: HttpRequest, header: str) -> str | None:
    """The raw value of ``header`` (WSGI/ASGI servers fold repeats into one, comma-joined)."""
    meta_name = "HTTP_" + header.upper().replace("-", "_")
    value = request.META.get(meta_name)
    if value is None:
        return None
    if isinstance(value, bytes):  # pragma: no cover - defensive: some servers pass bytes
        value = value.decode("latin-1")
    return str(value)
