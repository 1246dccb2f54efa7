"""How :class:`~idempotency.stores.RedisStore`'s records travel: the scripts' arguments
and the replies and hash fields read back as :class:`~idempotency.stores.records.KeyState`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from idempotency.codecs import seal, unseal
from idempotency.stores.records import ClaimStatus, KeyState, StoredResponse, now_ms

#: What a lookup reads of a record, in this order.
LOOKUP_FIELDS = ("state", "fp", "lease", "status", "headers", "body", "rp", "rd")


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _expires(ttl_ms: int) -> float | None:
    """When a record with ``ttl_ms`` left expires, on this process' clock (``PTTL``'s
    -1, no expiry, is None)."""
    return now_ms() / 1000 + ttl_ms / 1000 if ttl_ms > 0 else None


def _data(value: Any) -> Any:
    text = _text(value)
    return json.loads(text) if text else None


def key_state_from_reply(reply: list[Any], fence: int) -> KeyState:
    """The :class:`KeyState` of a ``CLAIM`` script's reply; ``fence`` is the claim's."""
    status = _text(reply[0])
    if status == "claimed":
        return KeyState(
            ClaimStatus.CLAIMED,
            fence=fence,
            recovery_point=_text(reply[1]),
            recovery_data=_data(reply[2]),
            taken_over=len(reply) > 3,
        )
    if status == "completed":
        return KeyState(
            ClaimStatus.COMPLETED,
            response=StoredResponse.from_parts(int(reply[1]), _text(reply[2]), unseal(reply[3])),
            expires_at=_expires(int(reply[4])),
        )
    if status == "in_progress":
        return KeyState(
            ClaimStatus.IN_PROGRESS,
            retry_after=int(reply[1]) / 1000,
            recovery_point=_text(reply[2]),
            recovery_data=_data(reply[3]),
        )
    return KeyState(ClaimStatus.MISMATCH, fingerprint=_text(reply[1]) if len(reply) > 1 else "")


def claim_args(
    fingerprint: str, fence: int, lease: float, ttl: float, method: str, route: str
) -> list[Any]:
    return [fingerprint, fence, int(lease * 1000), max(1, int(ttl * 1000)), method, route]


def complete_args(fence: int, response: StoredResponse, ttl: float) -> list[Any]:
    return [
        fence,
        response.status,
        response.headers_json(),
        seal(response.body),
        max(1, int(ttl * 1000)),
    ]


def recovery_args(fence: int, name: str, data: Any) -> list[Any]:
    return [fence, name, json.dumps(data) if data is not None else ""]


def key_state_from_fields(
    fields: list[Any], fingerprint: str, remaining: Callable[[], Any]
) -> KeyState | None:
    """The :class:`KeyState` of a record's ``HMGET`` of ``LOOKUP_FIELDS`` (None: absent);
    ``remaining`` gives its ``PTTL``, read only for a completed record."""
    state, fp, lease, status, headers, body, point, data = fields
    if state is None:
        return None
    if _text(fp) != fingerprint:
        return KeyState(ClaimStatus.MISMATCH, fingerprint=_text(fp))
    if _text(state) == "c":
        return KeyState(
            ClaimStatus.COMPLETED,
            response=StoredResponse.from_parts(int(status), _text(headers), unseal(body)),
            expires_at=_expires(int(remaining())),
        )
    left = (int(lease or 0) - now_ms()) / 1000
    return KeyState(
        ClaimStatus.IN_PROGRESS,
        retry_after=max(0.0, left),
        recovery_point=_text(point),
        recovery_data=_data(data),
    )
