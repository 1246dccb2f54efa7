"""Record authentication: every completed record carries a MAC over all of itself.

A store is storage, not a trusted party: whoever can write it (a Redis without AUTH, a
cache shared with another application, a database account with write access to one
table, a restored backup) must not be able to make the application replay a response
it did not store for that request. So every completed record, in every store and every
``BODY_CODEC`` mode, carries a *tag*: ``<expires_ms>:<mac>``, where ``mac`` is an
HMAC-SHA256, under a key derived from ``SECRET_KEY``
(:func:`idempotency.utils.hashing.record_macs`), of the record's name (the SHA-256
of its scope and key, :func:`~idempotency.stores.records.record_digest`, the name Redis and
caches file it under), its fingerprint, its fencing token, its status, headers and
stored body bytes (after the codec), and ``expires_ms``, the expiry the application
gave it. Rotation is ``SECRET_KEY_FALLBACKS``': a tag made under a fallback still
verifies until its record expires.

Every store calls the two functions here and nothing else: :func:`sign` when it
completes a record, :func:`verify` when it reads a completed one. A record that fails
raises :class:`~idempotency.exceptions.RecordForged` (logged under the record's hash,
counted by the ``record_forged`` signal); one whose authenticated expiry has passed is
expired, whatever expiry the store shows. Why a MAC and not an AEAD, and what it
cannot stop (a deleted record), is in docs/explanation/threat-model.md.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterable
from typing import Any

from idempotency import signals
from idempotency.exceptions import RecordForged
from idempotency.stores.records import StoredResponse, now_ms, record_digest
from idempotency.utils.hashing import log_ref, record_macs

logger = logging.getLogger("idempotency")

#: Names the layout of what is authenticated: a new layout gets a new version.
_VERSION = b"idempotency-record-v1"


def _material(
    name: str,
    fingerprint: str,
    fence: int,
    status: int,
    headers: Iterable[tuple[Any, Any]],
    body: bytes,
    expires_ms: int,
) -> bytes:
    """What is authenticated, each field prefixed by its length (no two records share
    one encoding); the body last."""
    parts = [
        _VERSION,
        name.encode(),
        fingerprint.encode("utf-8", "surrogatepass"),
        b"%d" % fence,
        b"%d" % status,
        b"%d" % expires_ms,
    ]
    for name, value in headers:
        parts.append(str(name).encode("utf-8", "surrogatepass"))
        parts.append(str(value).encode("utf-8", "surrogatepass"))
    parts.append(bytes(body))
    return b"".join(b"%d:" % len(part) + part for part in parts)


def sign(
    scope: str, key: str, *, fingerprint: str, fence: int, stored: StoredResponse, ttl: float
) -> str:
    """The tag of a record completed now that lives ``ttl`` seconds and holds ``stored``
    (its body as the store keeps it, after the codec)."""
    return tag_for(scope, key, fingerprint=fingerprint, fence=fence, stored=stored,
               expires_ms=now_ms() + max(1, int(ttl * 1000)))  # fmt: skip


def tag_for(
    scope: str,
    key: str,
    *,
    fingerprint: str,
    fence: int,
    stored: StoredResponse,
    expires_ms: int,
) -> str:
    """The tag of a record that expires at ``expires_ms`` (epoch milliseconds), under
    the current key."""
    return _tag(record_digest(scope, key), fingerprint, fence, stored, expires_ms)


def _tag(name: str, fingerprint: str, fence: int, stored: StoredResponse, expires_ms: int) -> str:
    data = _material(name, fingerprint, fence, stored.status, stored.headers, stored.body,
                     expires_ms)  # fmt: skip
    return f"{expires_ms}:{next(record_macs(data))}"


def _expiry(name: str, tag: Any, fingerprint: str, fence: Any, stored: StoredResponse) -> int:
    """The authenticated expiry (epoch ms) of the record filed under ``name``; a
    ``ValueError`` that says why when it fails."""
    text = tag.decode() if isinstance(tag, bytes | bytearray) else str(tag or "")
    expiry, colon, mac = text.partition(":")
    if not colon or not expiry.isdigit() or len(mac) != 64:
        raise ValueError("no tag" if not text else "a malformed tag")
    try:
        data = _material(name, fingerprint, int(fence), stored.status, stored.headers,
                         stored.body, int(expiry))  # fmt: skip
    except (TypeError, ValueError):
        raise ValueError("a malformed fencing token") from None
    for candidate in record_macs(data):
        if hmac.compare_digest(candidate, mac):
            return int(expiry)
    raise ValueError("a tag that does not match the record")


def verify(
    where: str,
    scope: str,
    key: str,
    *,
    tag: Any,
    fingerprint: str,
    fence: Any,
    stored: StoredResponse,
) -> float:
    """When the completed record holding ``stored`` (its body as kept) expires, in epoch
    seconds, as its tag says; :class:`~idempotency.exceptions.RecordForged` when the
    tag is missing, malformed, or made by no key of ``SECRET_KEY`` or
    ``SECRET_KEY_FALLBACKS`` over exactly these fields. ``where`` names the store."""
    try:
        return _expiry(record_digest(scope, key), tag, fingerprint, fence, stored) / 1000
    except ValueError as exc:
        raise forged(where, scope, key, str(exc)) from None


def authentic(
    scope: str, key: str, *, tag: Any, fingerprint: str, fence: Any, stored: StoredResponse
) -> bool:
    """Whether the completed record's ``tag`` verifies (as :func:`verify`, without logging
    or signalling: for the admin's display)."""
    try:
        _expiry(record_digest(scope, key), tag, fingerprint, fence, stored)
    except ValueError:
        return False
    return True


def resign(
    name: str, *, tag: Any, fingerprint: str, fence: Any, old: StoredResponse,
    new: StoredResponse,
) -> str | None:  # fmt: skip
    """The tag of the record filed under ``name`` (:func:`~idempotency.stores.records.
    record_digest` of its scope and key) whose stored form changes from ``old`` to
    ``new`` (the re-encryption of its body), keeping its authenticated expiry; None
    when ``old`` does not verify: a forged record is never signed anew."""
    try:
        expires_ms = _expiry(name, tag, fingerprint, fence, old)
    except ValueError:
        return None
    return _tag(name, fingerprint, int(fence), new, expires_ms)


def forged(where: str, scope: str, key: str, reason: str) -> Exception:
    """The :class:`~idempotency.exceptions.RecordForged` for the record of ``(scope,
    key)``: logged as an error under its hashed name (never the raw key or scope) and
    sent as the ``record_forged`` signal (the metrics count it)."""
    ref = log_ref(scope, key)
    logger.error(
        "idempotency: the record %s in %s failed its authentication (%s); it is not "
        "replayed and nothing ran. A store writer without the application's secret "
        "wrote, moved or altered it (or SECRET_KEY changed with no SECRET_KEY_FALLBACKS).",
        ref,
        where,
        reason,
    )
    signals.record_forged.send(
        sender=None, request=None, scope=scope, key=key, store=where, reason=reason
    )
    return RecordForged(
        f"The idempotency record {ref} failed its authentication; nothing was run.",
        scope=scope,
        key=key,
    )
