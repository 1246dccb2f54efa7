"""JSON encoding and decoding on the hot path, without the Python ``json`` wraps around C.

``json.dumps(value)`` calls ``JSONEncoder.encode``, which builds a new C encoder (and a
closure) on every call; ``json.loads(text)`` goes through two Python methods before the
C scanner. For the few bytes a request encodes (a fingerprint's canonical body, a
stored response's headers) that wrapping is most of the cost. :func:`encoder_of` and
:func:`decoder_of` call the C parts directly, built once with the options of a given
encoder or decoder, and write and read exactly what it does.

Only for values that are trees by construction (parsed JSON, lists of strings): the C
encoder built once runs without the per-call check for circular references, so a cycle
ends in ``RecursionError`` rather than ``ValueError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

#: JSON's whitespace (RFC 8259): what may surround a value.
WHITESPACE = " \t\n\r"
#: What a fast encoder must write as its encoder does before it is used.
_PROBE = {"b": [1, 2.5, None, True, "\u00e9\n\x00"], "a": {"k": [], "j": {}}}


def encoder_of(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """``encoder.encode``, calling the C encoder built once with ``encoder``'s options.

    ``encoder.encode`` itself where there is no C encoder (another Python, or
    ``indent``), where it takes other arguments, or where it writes a probe otherwise."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None or encoder.indent is not None:
        return encoder.encode
    strings = (
        json.encoder.encode_basestring_ascii
        if encoder.ensure_ascii
        else json.encoder.encode_basestring
    )
    try:
        encode_c = make(
            None,  # no markers: see the module's docstring
            encoder.default,
            strings,
            None,
            encoder.key_separator,
            encoder.item_separator,
            encoder.sort_keys,
            encoder.skipkeys,
            encoder.allow_nan,
        )

        def encode(value: Any) -> str:
            return "".join(encode_c(value, 0))

        if encode(_PROBE) == encoder.encode(_PROBE):
            return encode
    except (TypeError, ValueError):  # another signature or another encoder
        pass
    return encoder.encode


def decoder_of(decoder: json.JSONDecoder) -> Callable[[str], Any]:
    """``decoder.decode``, calling its C scanner directly; the same value, and
    ``json.JSONDecodeError`` (a ``ValueError``) for what it refuses."""
    # typeshed does not declare scan_once, which JSONDecoder.__init__ sets
    scan: Callable[[str, int], tuple[Any, int]] = decoder.scan_once  # type: ignore[attr-defined]

    def decode(text: str) -> Any:
        # most texts start with their value: no copy stripped of nothing
        start = len(text) - len(text.lstrip(WHITESPACE)) if text[:1] in WHITESPACE else 0
        try:
            value, end = scan(text, start)
        except StopIteration as exc:
            raise json.JSONDecodeError("Expecting value", text, exc.value) from None
        if end != len(text):
            rest = text[end:].lstrip(WHITESPACE)
            if rest:
                raise json.JSONDecodeError("Extra data", text, len(text) - len(rest))
        return value

    return decode


#: ``json.dumps``/``json.loads`` with their defaults.
dumps = encoder_of(json.JSONEncoder())
loads = decoder_of(json.JSONDecoder())
