"""Parsing of the ``Idempotency-Key`` header.

The draft (draft-ietf-httpapi-idempotency-key-header) makes the header an RFC 8941
Item whose value is a String: ``"abc"``. Two syntaxes, chosen by ``KEY_SYNTAX``:

* ``"lenient"`` (the default): an sf-string or a bare value (``abc``), so clients that
  send the key unquoted (most do) keep working. Parameters (``;name=value`` after the
  key) are refused in both forms alike: the draft defines none, and a bare key that
  contained ``;a=1`` could not be told from a key with a parameter. A key that
  contains ``;`` is sent quoted.
* ``"strict"``: exactly the draft: only an sf-string, parsed as an RFC 8941 Item, so
  its parameters are accepted when well-formed and are no part of the key.

Either way the key is 1 to 255 printable ASCII characters, and more than one header
(which servers fold into one, comma-joined) is refused.
"""

from __future__ import annotations

import re

from django.http import HttpRequest

from idempotency.conf import MAX_KEY_LENGTH, idempotency_settings
from idempotency.exceptions import KeyInvalid

#: RFC 8941 parameters after an Item: ``;key[=bare-item]``, repeated.
_BARE_ITEM = (
    r'(?:-?\d{1,12}\.\d{1,3}|-?\d{1,15}|"(?:[^"\\]|\\["\\])*"'
    r"|[A-Za-z*][!#$%&'*+\-.^_`|~:/0-9A-Za-z]*|:[A-Za-z0-9+/=]*:|\?[01])"
)
_PARAMETERS = re.compile(rf"(?:;[ ]*[a-z*][a-z0-9_\-.*]*(?:={_BARE_ITEM})?)*")


def _printable(text: str) -> bool:
    """Only printable ASCII (0x20-0x7E): the string methods run in C, not per character."""
    return text.isascii() and text.isprintable()


def _unquote(value: str, *, strict: bool) -> str:
    """The content of an sf-string: ``"..."`` with ``\\"`` and ``\\\\`` escapes, and
    what follows it checked (parameters: refused, or in strict mode RFC 8941's)."""
    chars: list[str] = []
    i = 1
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value) or value[i + 1] not in '"\\':
                raise KeyInvalid("The quoted Idempotency-Key has an invalid escape.")
            chars.append(value[i + 1])
            i += 2
            continue
        if ch == '"':
            _check_rest(value[i + 1 :], strict=strict)
            return "".join(chars)
        chars.append(ch)
        i += 1
    raise KeyInvalid("The quoted Idempotency-Key is not terminated.")


def _check_rest(rest: str, *, strict: bool) -> None:
    """What follows the closing quote: nothing, or (strict) RFC 8941 parameters."""
    rest = rest.rstrip(" \t")
    if not rest or (strict and _PARAMETERS.fullmatch(rest)):
        return  # strict: an Item's well-formed parameters, no part of the key
    if "," in rest if strict else rest.lstrip(" \t").startswith(","):
        raise KeyInvalid("Send exactly one Idempotency-Key header.")
    raise KeyInvalid(
        "The Idempotency-Key must be one RFC 8941 string, with well-formed parameters."
        if strict
        else "The Idempotency-Key must be a single string, without parameters."
    )


def parse_key(raw: str | None, *, strict: bool | None = None) -> str | None:
    """The key carried by a header value, None when absent; raises on a malformed value.

    ``strict`` (default: ``KEY_SYNTAX == "strict"``) accepts only RFC 8941 sf-strings.
    """
    if raw is None:
        return None
    if strict is None:
        strict = idempotency_settings.KEY_SYNTAX == "strict"
    value = raw.strip(" \t")
    if not (value.isascii() and value.isprintable()):  # _printable, inlined: every request
        raise KeyInvalid("The Idempotency-Key must be printable ASCII.")
    if value.startswith('"'):
        key = _unquote(value, strict=strict)
    elif strict:
        raise KeyInvalid('The Idempotency-Key must be an RFC 8941 string: quote it, as in "abc".')
    else:
        if "," in value:
            raise KeyInvalid("Send exactly one Idempotency-Key header.")
        if '"' in value or "\\" in value:
            raise KeyInvalid("The Idempotency-Key has stray quotes or backslashes.")
        if ";" in value:
            raise KeyInvalid(
                "The Idempotency-Key must be a single string, without parameters "
                '(quote a key that contains ";", as in "a;b").'
            )
        key = value
    if not key:
        raise KeyInvalid("The Idempotency-Key is empty.")
    if len(key) > MAX_KEY_LENGTH:
        raise KeyInvalid(f"The Idempotency-Key is longer than {MAX_KEY_LENGTH} characters.")
    return key


#: Header name -> its WSGI ``META`` name (``Idempotency-Key`` -> ``HTTP_IDEMPOTENCY_KEY``).
_META_NAMES: dict[str, str] = {}


def header_value(request: HttpRequest, header: str) -> str | None:
    """The raw value of ``header`` (WSGI/ASGI servers fold repeats into one, comma-joined)."""
    meta_name = _META_NAMES.get(header)
    if meta_name is None:
        meta_name = _META_NAMES[header] = "HTTP_" + header.upper().replace("-", "_")
    value = request.META.get(meta_name)
    if value is None:
        return None
    if isinstance(value, bytes):  # pragma: no cover - defensive: some servers pass bytes
        value = value.decode("latin-1")
    return str(value)
