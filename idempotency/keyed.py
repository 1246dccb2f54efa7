"""Keyed hashes under a server secret: request and argument fingerprints, log references.

A stored fingerprint, or a hash in a log line, must give no brute-force oracle: an
unkeyed SHA-256 of ``{"pan": ..., "cvv": "737"}`` gives the CVV back in a fraction of a
second. Each purpose gets its own HMAC-SHA256 key, derived from ``SECRET_KEY`` with
Django's :func:`~django.utils.crypto.salted_hmac` under a fixed salt, or from the
``FINGERPRINT_SECRETS`` setting. Rotation: the keys of ``SECRET_KEY_FALLBACKS`` (or of
the later entries of ``FINGERPRINT_SECRETS``) still match the fingerprints they made.
Keys are derived once and again whenever the settings change.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.utils.crypto import salted_hmac

from idempotency.conf import idempotency_settings, on_reload

#: The salts of the purposes (never change them: every stored fingerprint depends on them).
FINGERPRINT_SALT = "idempotency.keyed.fingerprint"
LOG_SALT = "idempotency.keyed.log"

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


def fingerprint_hex(data: bytes) -> str:
    """The keyed fingerprint of ``data`` (64 hex digits) under the current key."""
    try:
        key = _keys[FINGERPRINT_SALT][0]
    except KeyError:
        key = keys(FINGERPRINT_SALT)[0]
    return hmac.digest(key, data, "sha256").hex()


def older_fingerprints(data: bytes) -> list[str]:
    """What ``data``'s fingerprint was under the older keys (rotation) and, while
    ``FINGERPRINT_ACCEPT_UNKEYED`` is on, unkeyed (``data`` then is the SHA-256 digest
    that fingerprints before keyed ones stored as hex)."""
    older = [hmac.digest(key, data, "sha256").hex() for key in keys(FINGERPRINT_SALT)[1:]]
    if idempotency_settings.FINGERPRINT_ACCEPT_UNKEYED:
        older.append(data.hex())
    return older


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
