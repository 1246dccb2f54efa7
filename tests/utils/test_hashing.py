"""Keyed hashes under a server secret (issue 36, findings 5 and 11)."""

from __future__ import annotations

import hashlib
import hmac

from django.test import override_settings

from idempotency.utils.hashing import (
    FINGERPRINT_SALT,
    LOG_SALT,
    fingerprint_hex,
    keys,
    log_hash,
    older_fingerprints,
)


def test_the_fingerprint_is_hmac_sha256_under_the_derived_key() -> None:
    data = b"material"
    (key, *_older) = keys(FINGERPRINT_SALT)
    assert fingerprint_hex(data) == hmac.new(key, data, hashlib.sha256).hexdigest()
    assert fingerprint_hex(data) != hashlib.sha256(data).hexdigest()


def test_each_secret_and_purpose_gives_its_own_key() -> None:
    before = fingerprint_hex(b"x")
    assert keys(LOG_SALT) != keys(FINGERPRINT_SALT)
    with override_settings(SECRET_KEY="s" * 60):
        assert fingerprint_hex(b"x") != before
        assert log_hash("key") != hashlib.sha256(b"key").hexdigest()[:16]
    assert fingerprint_hex(b"x") == before  # derived again once the setting is back


def test_older_secrets_and_the_unkeyed_form_are_accepted_for_rotation() -> None:
    digest = hashlib.sha256(b"body").digest()
    with override_settings(IDEMPOTENCY={"FINGERPRINT_SECRETS": ["old" * 20]}):
        old = fingerprint_hex(digest)
    with override_settings(IDEMPOTENCY={"FINGERPRINT_SECRETS": ["new" * 20, "old" * 20]}):
        assert fingerprint_hex(digest) != old
        assert older_fingerprints(digest) == [old, digest.hex()]
    with override_settings(
        IDEMPOTENCY={"FINGERPRINT_SECRETS": ["new" * 20], "FINGERPRINT_ACCEPT_UNKEYED": False}
    ):
        assert older_fingerprints(digest) == []
