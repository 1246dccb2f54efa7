"""The contract as OpenAPI documents it, whatever generates the schema: the
``Idempotency-Key`` parameter, the ``Idempotent-Replayed`` header and the problem answers
the layer itself gives. drf-spectacular's schema
(:mod:`idempotency.contrib.openapi.spectacular`) and Django Ninja's
(:mod:`idempotency.contrib.ninja`) both build on these. This module needs no extra."""

from __future__ import annotations

from typing import Any

from idempotency.conf import MAX_KEY_LENGTH, idempotency_settings

# What the server accepts as a key, exactly (see idempotency.http.requests): a bare value of
# printable ASCII without ", \\, "," or ";" that neither starts nor ends with a space,
# or an RFC 8941 sf-string whose content is 1 to 255 characters.
_BARE = "[!#-+\\--:<-\\[\\]-~]"
_MIDDLE = "[ !#-+\\--:<-\\[\\]-~]"
_QUOTED = f'"(?:[ !#-\\[\\]-~]|\\\\["\\\\]){{1,{MAX_KEY_LENGTH}}}"'
#: The ``pattern`` of the header's schema, by ``KEY_SYNTAX``.
KEY_PATTERNS = {
    "lenient": f"^(?:{_BARE}(?:{_MIDDLE}{{0,{MAX_KEY_LENGTH - 2}}}{_BARE})?|{_QUOTED})$",
    "strict": f"^{_QUOTED}$",
}

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An RFC 9457 problem details document.",
    "properties": {
        "type": {"type": "string", "format": "uri"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "code": {"type": "string", "description": "Stable code of the error."},
    },
    "required": ["type", "title", "status", "detail", "code"],
}

#: The header of a replayed success response.
REPLAYED_HEADER: dict[str, Any] = {
    "Idempotent-Replayed": {
        "description": "`true` when this is the stored response of an earlier request.",
        "schema": {"type": "string", "enum": ["true"]},
    }
}

_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying with the same key.",
        "schema": {"type": "integer", "minimum": 1},
    }
}


#: The OpenAPI extension of the key parameter that carries its expiry, in seconds.
EXPIRY_EXTENSION = "x-idempotency-key-expires-after"


def duration(seconds: float) -> str:
    """``86400`` -> ``"24 hours"``, ``90`` -> ``"90 seconds"``: the largest whole unit."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0 and (unit != "day" or seconds > 86400):
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    whole = int(seconds) if float(seconds).is_integer() else seconds
    return f"{whole} second{'s' if whole != 1 else ''}"


def expiry(policy: Any) -> str:
    """How long a key and its response are kept under ``policy`` (``ttl``, ``error_ttl``):
    the expiry policy the IETF draft asks a resource to publish."""
    ttl = policy.get_ttl()
    kept = (
        f"The key and the stored response are kept for {duration(ttl)} ({ttl:g} s) after "
        "the first request completes; after that the key is free again and a request "
        "with it runs anew."
    )
    errors = policy.get_ttl_for(400)
    if errors == ttl:
        return kept
    if errors == 0:
        return kept + " A 4xx answer is not kept: a retry after one runs again."
    return kept + f" A 4xx answer is kept for {duration(errors)} ({errors:g} s)."


def key_parameter(policy: Any) -> dict[str, Any]:
    """The ``Idempotency-Key`` header parameter of an operation under ``policy``, with its
    expiry in words and, in seconds, as the ``x-idempotency-key-expires-after`` extension."""
    header = str(idempotency_settings.HEADER)
    required = policy.get_required()
    strict = idempotency_settings.KEY_SYNTAX == "strict"
    form = 'an RFC 8941 string: "abc"' if strict else 'bare, or as an RFC 8941 string: "abc"'
    return {
        "in": "header",
        "name": header,
        "required": required,
        "description": (
            f"{'Required' if required else 'Optional'}: a unique key per logical "
            f"operation, 1 to {MAX_KEY_LENGTH} printable ASCII characters ({form}; a "
            'key containing ";" or "," is quoted). A retry with the same key and '
            "request replays the first response instead of running it again. " + expiry(policy)
        ),
        EXPIRY_EXTENSION: policy.get_ttl(),
        "schema": {
            "type": "string",
            "minLength": 1,
            "maxLength": 2 + 2 * MAX_KEY_LENGTH,
            "pattern": KEY_PATTERNS["strict" if strict else "lenient"],
        },
    }


def problem_answers(policy: Any) -> list[tuple[int, str, dict[str, Any] | None]]:
    """``(status, description, headers)`` of every problem the layer can answer."""
    header = str(idempotency_settings.HEADER)
    required = policy.get_required()
    return [
        (
            400,
            f"The {header} header is malformed (idempotency-key-invalid)"
            + (" or missing (idempotency-key-required)." if required else "."),
            None,
        ),
        (
            403,
            "A key from an anonymous caller, where keys are only accepted from "
            "authenticated ones (idempotency-anonymous-not-allowed).",
            None,
        ),
        (
            409,
            "A request with this key is still in progress (idempotency-request-in-progress).",
            _RETRY_AFTER,
        ),
        (
            410,
            "The request with this key completed, but its response was too large to store, "
            "so it cannot be replayed; it will not run again (idempotency-response-not-stored).",
            None,
        ),
        (413, "The request body is larger than the server accepts (payload-too-large).", None),
        (
            422,
            "The key was already used with a different request (idempotency-key-mismatch).",
            None,
        ),
        (
            503,
            "The idempotency store is unreachable, or its write could not be replicated in "
            "time, so the request did not run (idempotency-store-unavailable, "
            "idempotency-store-not-durable); or the store is misconfigured "
            "(idempotency-store-misconfigured).",
            _RETRY_AFTER,
        ),
    ]
