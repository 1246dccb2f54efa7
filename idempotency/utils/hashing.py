"""Keyed hashes under a server secret: request and argument fingerprints, log references.

A stored fingerprint, or a hash in a log line, must give no brute-force oracle: an
unkeyed SHA-256 of ``{"pan": ..., "cvv": "737"}`` gives the CVV back in a fraction of a
second. Each purpose gets its own HMAC-SHA256 key, derived from ``SECRET_KEY`` with
Django's :func:`~django.utils.crypto.salted_hmac` under a fixed salt, or from the
``FINGERPRINT_SECRETS`` setting. Rotation: the keys of ``SECRET_KEY_FALLBACKS`` (or of
the later entries of ``FINGERPRINT_SECRETS``) still match the fingerprints they made.
Stored records are authenticated under a purpose of their own (:func:`record_macs`,
:mod:`idempotency.stores.records`), rotated with ``SECRET_KEY_FALLBACKS``.
Keys are derived once and again whenever the settings change.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.utils.crypto import salted_hmac

from idempotency.conf import idempotency_settings, on_reload

#: The salts of the purposes (never change them: every stored fingerprint depends on them).
FINGERPRINT_SALT = "idempotency.utils.hashing.fingerprint"
LOG_SALT = "idempotency.utils.hashing.log"
RECORD_SALT = "idempotency.utils.hashing.record"

_keys: dict[str, tuple[bytes, ...]] = {}


def _secrets(purpose: str) -> list[str | bytes]:
    if purpose == FINGERPRINT_SALT and idempotency_settings.FINGERPRINT_SECRETS:
        return list(idempotency_settings.FINGERPRINT_SECRETS)
    return [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ())]


def keys(purpose: str) -> tuple[bytes, ...]:
    """The HMAC keys of ``purpose`` (a salt): the current one first, then older ones."""
    try:
        return _keys[purpose]
    except KeyError:
        pass
    derived = tuple(
        salted_hmac(purpose, b"key", secret=secret, algorithm="sha256").digest()
        for secret in _secrets(purpose)
    )
    _keys[purpose] = derived
    return derived


@on_reload
def _forget_keys() -> None:
    _keys.clear()
    _pads.clear()


#: HMAC's pads (RFC 2104), as tables for ``bytes.translate``.
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))
_BLOCK = 64  # SHA-256's block size

_pads: dict[str, tuple[tuple[Any, Any], ...]] = {}


def pads(purpose: str) -> tuple[tuple[Any, Any], ...]:
    """For each key of ``purpose`` (current first), SHA-256 states that have hashed its
    inner and outer pad: ``HMAC(k, m) = outer.copy() + (inner.copy() + m).digest()``.
    Copying a state that hashed the pad is cheaper than ``hmac.digest``, which looks
    OpenSSL's algorithm up and hashes both pads again on every call."""
    try:
        return _pads[purpose]
    except KeyError:
        pass
    found = []
    for key in keys(purpose):
        block = (key if len(key) <= _BLOCK else hashlib.sha256(key).digest()).ljust(_BLOCK, b"\0")
        found.append(
            (hashlib.sha256(block.translate(_IPAD)), hashlib.sha256(block.translate(_OPAD)))
        )
    _pads[purpose] = tuple(found)
    return _pads[purpose]


def _finish(outer: Any, inner: Any) -> str:
    final = outer.copy()
    final.update(inner.digest())
    return str(final.hexdigest())


def fingerprint_start() -> Any:
    """A SHA-256 state to stream a fingerprint's material into (:func:`fingerprint_end`)."""
    try:
        return _pads[FINGERPRINT_SALT][0][0].copy()
    except KeyError:
        return pads(FINGERPRINT_SALT)[0][0].copy()


def fingerprint_end(inner: Any) -> str:
    """The keyed fingerprint (64 hex digits, HMAC-SHA256 under the current key) of what
    was streamed into ``inner`` (a :func:`fingerprint_start` state)."""
    return _finish(pads(FINGERPRINT_SALT)[0][1], inner)


def fingerprint_hex(data: bytes) -> str:
    """The keyed fingerprint of ``data`` (64 hex digits) under the current key."""
    inner = fingerprint_start()
    inner.update(data)
    return fingerprint_end(inner)


def older_fingerprints(data: bytes) -> list[str]:
    """What ``data``'s fingerprint was under the older keys (rotation) and, while
    ``FINGERPRINT_ACCEPT_UNKEYED`` is on, unkeyed (``data`` then is the SHA-256 digest
    that fingerprints before keyed ones stored as hex)."""
    older = []
    for inner, outer in pads(FINGERPRINT_SALT)[1:]:
        state = inner.copy()
        state.update(data)
        older.append(_finish(outer, state))
    if idempotency_settings.FINGERPRINT_ACCEPT_UNKEYED:
        older.append(data.hex())
    return older


def older_streamed_fingerprints(material: Callable[[Any], Any]) -> list[str]:
    """:func:`older_fingerprints` of a streamed material: ``material(state)`` streams it
    into a SHA-256 state (and returns it). Unkeyed, it was the plain SHA-256 of it."""
    older = [_finish(outer, material(inner.copy())) for inner, outer in pads(FINGERPRINT_SALT)[1:]]
    if idempotency_settings.FINGERPRINT_ACCEPT_UNKEYED:
        older.append(str(material(hashlib.sha256()).hexdigest()))
    return older


def record_macs(data: bytes) -> Iterator[str]:
    """The record authenticator of ``data`` (64 hex digits, HMAC-SHA256) under each key
    of the records' purpose: the current one first, then those of
    ``SECRET_KEY_FALLBACKS``, computed one at a time as they are asked for."""
    for inner, outer in pads(RECORD_SALT):
        state = inner.copy()
        state.update(data)
        yield _finish(outer, state)


def log_hash(value: str) -> str:
    """``value`` (a key or a scope) as logs show it: 16 hex digits of a keyed hash."""
    try:
        key = _keys[LOG_SALT][0]
    except KeyError:
        key = keys(LOG_SALT)[0]
    return hmac.digest(key, value.encode("utf-8", "surrogatepass"), "sha256").hex()[:16]


def log_ref(scope: str, key: str) -> str:
    """A record as logs name it: ``scope_hash/key_hash`` (see :func:`log_hash`)."""
    return f"{log_hash(str(scope))}/{log_hash(str(key))}"
