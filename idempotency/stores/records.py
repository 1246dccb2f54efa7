"""What a store answers and keeps: the records of the store contract.

:class:`StoredResponse` (what replay needs), :class:`KeyState` (a store's answer about a
key, what :meth:`~idempotency.stores.base.BaseStore.claim` returns), :class:`ClaimStatus`,
and the values every store draws: fencing tokens, the names of records in caches and
Redis, the clock in milliseconds and the record quota's windows.
"""

from __future__ import annotations

import enum
import hashlib
import os
import random
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from idempotency.utils import json_codec


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
