"""What a store answers and keeps: the records of the store contract, and their
authentication.

:class:`StoredResponse` (what replay needs), :class:`KeyState` (a store's answer about a
key, what :meth:`~idempotency.stores.base.BaseStore.claim` returns), :class:`ClaimStatus`,
and the values every store draws: fencing tokens, the names of records in caches and
Redis, the clock in milliseconds and the record quota's windows.

Authentication: every completed record carries a MAC over all of itself.

A store is storage, not a trusted party: whoever can write it (a Redis without AUTH, a
cache shared with another application, a database account with write access to one
table, a restored backup) must not be able to make the application replay a response
it did not store for that request. So every completed record, in every store and every
``BODY_CODEC`` mode, carries a *tag*: ``<expires_ms>:<mac>``, where ``mac`` is an
HMAC-SHA256, under a key derived from ``SECRET_KEY``
(:func:`idempotency.utils.hashing.record_macs`), of the record's name (the SHA-256
of its scope and key, :func:`record_digest`, the name Redis and
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

import enum
import hashlib
import hmac
import logging
import os
import random
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from idempotency import signals
from idempotency.exceptions import RecordForged
from idempotency.utils import json_codec
from idempotency.utils.hashing import log_ref, record_macs


class StoredResponse(NamedTuple):
    """What replay needs: status, allow-listed headers and the exact body bytes.

    An immutable record (a named tuple: a frozen dataclass sets each field through
    ``object.__setattr__``, and one is built for every replay and every stored response)."""

    status: int
    headers: Sequence[tuple[str, str]] = ()
    body: bytes = b""

    def headers_json(self) -> str:
        return json_codec.dumps(self.headers)

    @classmethod
    def from_parts(
        cls, status: int, headers: Any, body: bytes | memoryview | None
    ) -> StoredResponse:
        if isinstance(headers, str):
            headers = json_codec.loads(headers)
        return cls(
            int(status),
            [(str(k), str(v)) for k, v in (headers or ())],
            bytes(body or b""),
        )


class ClaimStatus(enum.Enum):
    CLAIMED = "claimed"  # the caller owns the key now and must complete or release it
    COMPLETED = "completed"  # a stored response exists: replay it
    IN_PROGRESS = "in_progress"  # someone else owns a live lease
    MISMATCH = "mismatch"  # the key is live with another request's fingerprint


class KeyState(NamedTuple):
    """A store's answer about a key: who owns it, or what its record holds.

    An immutable record (a named tuple: a frozen dataclass sets each field through
    ``object.__setattr__``, and every claim, lookup and replay builds one)."""

    status: ClaimStatus
    #: The fencing token that proves ownership (CLAIMED only).
    fence: int = 0
    #: The stored response to replay (COMPLETED only).
    response: StoredResponse | None = None
    #: The last recovery point of an earlier owner (CLAIMED after a take-over, IN_PROGRESS).
    recovery_point: str = ""
    recovery_data: Any = None
    #: Seconds left of the owner's lease (IN_PROGRESS only).
    retry_after: float = 0.0
    #: True when the key was taken over (CLAIMED only) from an owner whose lease ran
    #: out; it may have crashed after its effect, before its record.
    taken_over: bool = False
    #: MISMATCH only, where the store knows it: the fingerprint of the live record.
    fingerprint: str = ""
    #: COMPLETED only, where the store knows it: when the record expires (epoch seconds).
    expires_at: float | None = None

    @property
    def owned(self) -> bool:
        return self.status is ClaimStatus.CLAIMED


#: Fencing tokens' own generator, seeded from ``os.urandom`` and again in every forked
#: child (two workers forked from one parent must not draw the same tokens), never
#: from what an application does to the ``random`` module (``random.seed(0)`` in two
#: processes would give them the same tokens). A token must be unique, not secret: it
#: never leaves the server. ``secrets.randbits`` would ask the kernel on every claim.
_fences = random.Random()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fences.seed)


def new_fence() -> int:
    """A fencing token unique per claim (63 random bits: fits a signed BIGINT)."""
    return _fences.getrandbits(63) or 1


def record_digest(scope: str, key: str) -> str:
    """A short fixed-length name for ``(scope, key)`` in caches and Redis."""
    return hashlib.sha256(f"{scope}\x00{key}".encode()).hexdigest()[:40]


def now_ms() -> int:
    return int(time.time() * 1000)


def quota_window(window: float, now: float) -> tuple[int, float]:
    """The fixed window of ``window`` seconds ``now`` falls in: its start (whole epoch
    seconds, the counter's name) and the seconds left of it."""
    start = int(now // window * window)
    return start, max(0.001, start + window - now)


# -- authentication: every completed record's tag -------------------------------------------

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
    """The tag of the record filed under ``name`` (:func:`record_digest` of its scope and
    key) whose stored form changes from ``old`` to ``new`` (the re-encryption of its body),
    keeping its authenticated expiry; None when ``old`` does not verify: a forged record
    is never signed anew."""
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
