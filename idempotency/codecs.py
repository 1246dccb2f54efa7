"""Codecs of stored response bodies: what a store keeps instead of the bytes themselves.

Every store passes a body through the codec ``BODY_CODEC`` names on its way in
(:meth:`BodyCodec.encode`, when a response or a result is stored) and on its way out
(:meth:`BodyCodec.decode`, when it is replayed). The default,
:class:`IdentityCodec`, keeps the bytes as they are; :class:`FernetCodec` encrypts
them (the ``crypto`` extra), with key rotation. A body the codec cannot decode (a key
no longer listed, a tampered value) makes its record unreadable: the request is
answered ``idempotency-record-unreadable`` and nothing runs.

Headers are not encoded: they are the allow-listed ``REPLAY_HEADERS`` (Content-Type,
Location, ...), kept readable for the admin; leave a header out of that list if it
carries what must not be stored in clear.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from idempotency.conf import idempotency_settings, on_reload


class UndecodableBody(ValueError):
    """A stored body its codec cannot decode: the record is unreadable (a
    :class:`ValueError`, as every unreadable field of a record is)."""


class BodyCodec:
    """What a codec of stored bodies implements: ``encode`` and ``decode``.

    Name a subclass in ``IDEMPOTENCY["BODY_CODEC"]`` (a dotted path); it is built with no
    arguments, once until the settings change. ``decode(encode(body)) == body`` for
    every body, the empty one included; ``decode`` raises :class:`UndecodableBody` for
    bytes it cannot decode, never returns something else instead.
    """

    def encode(self, data: bytes) -> bytes:
        """The bytes to store for the body ``data``."""
        raise NotImplementedError

    def decode(self, data: bytes) -> bytes:
        """The body stored as ``data``; :class:`UndecodableBody` when it cannot be read."""
        raise NotImplementedError


class IdentityCodec(BodyCodec):
    """Bodies stored as they are (the default)."""

    def encode(self, data: bytes) -> bytes:
        return data

    def decode(self, data: bytes) -> bytes:
        return data


class RotatingCodec(BodyCodec):
    """A codec whose stored bodies can be re-encoded under its newest key
    (``manage.py reencrypt_idempotency_records``)."""

    def rotate(self, data: bytes) -> bytes:
        """``data`` re-encoded under the newest key; :class:`UndecodableBody` if unreadable."""
        raise NotImplementedError

    def is_encoded(self, data: bytes) -> bool:
        """Whether ``data`` has this codec's form at all (a body stored before the codec was
        turned on does not)."""
        raise NotImplementedError


class FernetCodec(RotatingCodec):
    """Bodies encrypted and authenticated with Fernet (AES-128-CBC and HMAC-SHA256), from
    the ``cryptography`` package (``pip install "/path/to/django-idempotency[crypto]"``).

    ``keys`` (default ``BODY_ENCRYPTION_KEYS``): Fernet keys, newest first. The first
    encrypts; every one decrypts, so a new key goes first and an old one stays listed
    until ``manage.py reencrypt_idempotency_records`` has re-encrypted what it wrote (or
    its records have expired, after ``TTL``). Make a key with
    ``cryptography.fernet.Fernet.generate_key()``.
    """

    def __init__(self, keys: Sequence[str | bytes] | None = None) -> None:
        try:
            from cryptography.fernet import Fernet, InvalidToken, MultiFernet
        except ImportError as exc:  # pragma: no cover - the crypto extra is missing
            raise ImproperlyConfigured(
                "FernetCodec needs the cryptography package: the crypto extra, pip install "
                "'/path/to/django-idempotency[crypto]' (from a checkout: docs/installation.md)"
            ) from exc
        chosen = list(idempotency_settings.BODY_ENCRYPTION_KEYS if keys is None else keys)
        if not chosen:
            raise ImproperlyConfigured(
                "FernetCodec needs at least one key in IDEMPOTENCY['BODY_ENCRYPTION_KEYS']."
            )
        try:
            fernets = [Fernet(key) for key in chosen]
        except (ValueError, TypeError, binascii.Error) as exc:
            # the key itself is never shown: it is a secret
            raise ImproperlyConfigured(
                "IDEMPOTENCY['BODY_ENCRYPTION_KEYS'] holds a value that is not a Fernet key "
                "(32 url-safe base64-encoded bytes)."
            ) from exc
        self._fernet = MultiFernet(fernets)
        self._invalid = InvalidToken

    def encode(self, data: bytes) -> bytes:
        return self._fernet.encrypt(data)

    def decode(self, data: bytes) -> bytes:
        try:
            return self._fernet.decrypt(data)
        except (self._invalid, TypeError) as exc:
            raise UndecodableBody(
                "the stored body does not decrypt under any of BODY_ENCRYPTION_KEYS "
                "(a key no longer listed, or a tampered value)"
            ) from exc

    def rotate(self, data: bytes) -> bytes:
        try:
            return self._fernet.rotate(data)
        except (self._invalid, TypeError) as exc:
            raise UndecodableBody("the stored body does not decrypt under any key") from exc

    def is_encoded(self, data: bytes) -> bool:
        """A Fernet token: url-safe base64 of version byte 0x80, a timestamp, an IV, at
        least one cipher block and an HMAC (57 bytes at least)."""
        try:
            raw = base64.urlsafe_b64decode(data)
        except (binascii.Error, ValueError):
            return False
        return len(raw) >= 57 and raw[0] == 0x80


_codec: BodyCodec | None = None


def body_codec() -> BodyCodec:
    """The codec ``BODY_CODEC`` names (a class, built once until the settings change, or
    an instance given as it is)."""
    global _codec
    if _codec is None:
        configured: Any = idempotency_settings.imported("BODY_CODEC")
        codec = configured() if isinstance(configured, type) else configured
        if not isinstance(codec, BodyCodec):
            raise ImproperlyConfigured(
                f"IDEMPOTENCY['BODY_CODEC'] must name a subclass of "
                f"idempotency.codecs.BodyCodec, not {type(codec).__name__}."
            )
        _codec = codec
    return _codec


@on_reload
def _forget_codec() -> None:
    global _codec
    _codec = None


def seal(body: bytes) -> bytes:
    """``body`` as the store keeps it."""
    codec = body_codec()
    if type(codec) is IdentityCodec:
        return body
    return codec.encode(body)


def unseal(stored: bytes | memoryview | None) -> bytes:
    """The body a store kept as ``stored``; :class:`UndecodableBody` when unreadable."""
    data = bytes(stored or b"")
    codec = body_codec()
    if type(codec) is IdentityCodec:
        return data
    return codec.decode(data)


__all__ = [
    "BodyCodec",
    "FernetCodec",
    "IdentityCodec",
    "RotatingCodec",
    "UndecodableBody",
    "body_codec",
    "seal",
    "unseal",
]
