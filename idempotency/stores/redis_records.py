"""How :class:`~idempotency.stores.RedisStore`'s records travel: the scripts' arguments
and the replies and hash fields read back as :class:`~idempotency.stores.records.KeyState`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from idempotency.codecs import seal, unseal
from idempotency.stores import authentication
from idempotency.stores.records import ClaimStatus, KeyState, StoredResponse, now_ms

#: What a lookup reads of a record, in this order.
LOOKUP_FIELDS = ("state", "fp", "lease", "status", "headers", "body", "rp", "rd", "fence", "mac")


def as_text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _expires(ttl_ms: int) -> float | None:
    """When a record with ``ttl_ms`` left expires, on this process' clock (``PTTL``'s
    -1, no expiry, is None)."""
    return now_ms() / 1000 + ttl_ms / 1000 if ttl_ms > 0 else None


def _data(value: Any) -> Any:
    text = as_text(value)
    return json.loads(text) if text else None


def _completed(
    scope: str, key: str, fingerprint: str, fields: list[Any], ttl_ms: int
) -> KeyState | None:
    """The state of a completed record's ``fp, fence, mac, status, headers, body``,
    authenticated first (:mod:`~idempotency.stores.authentication`): None once its
    authenticated expiry has passed."""
    fp, fence, tag, status, headers, body = fields
    kept = StoredResponse.from_parts(int(status), as_text(headers), body)
    authenticated = authentication.verify(
        "RedisStore",
        scope,
        key,
        tag=tag,
        fingerprint=as_text(fp),
        fence=as_text(fence),
        stored=kept,
    )
    expires = _expires(ttl_ms)
    expires = authenticated if expires is None else min(expires, authenticated)
    if expires <= now_ms() / 1000:
        return None
    if as_text(fp) != fingerprint:
        return KeyState(ClaimStatus.MISMATCH, fingerprint=as_text(fp))
    return KeyState(
        ClaimStatus.COMPLETED, response=kept._replace(body=unseal(kept.body)), expires_at=expires
    )


def key_state_from_reply(
    reply: list[Any], fence: int, scope: str, key: str, fingerprint: str
) -> KeyState:
    """The :class:`KeyState` of a ``CLAIM`` script's reply; ``fence`` is the claim's. A
    completed record past its authenticated expiry, which Redis still keeps (its TTL
    was lengthened), is answered as in progress until Redis drops it."""
    status = as_text(reply[0])
    if status == "claimed":
        return KeyState(
            ClaimStatus.CLAIMED,
            fence=fence,
            recovery_point=as_text(reply[1]),
            recovery_data=_data(reply[2]),
            taken_over=len(reply) > 3,
        )
    if status == "completed":
        fields = [reply[5], reply[6], reply[7], reply[1], reply[2], reply[3]]
        found = _completed(scope, key, fingerprint, fields, int(reply[4]))
        return KeyState(ClaimStatus.IN_PROGRESS, retry_after=1.0) if found is None else found
    if status == "in_progress":
        return KeyState(
            ClaimStatus.IN_PROGRESS,
            retry_after=int(reply[1]) / 1000,
            recovery_point=as_text(reply[2]),
            recovery_data=_data(reply[3]),
        )
    return KeyState(ClaimStatus.MISMATCH, fingerprint=as_text(reply[1]) if len(reply) > 1 else "")


def claim_args(
    fingerprint: str, fence: int, lease: float, ttl: float, method: str, route: str
) -> list[Any]:
    return [fingerprint, fence, int(lease * 1000), max(1, int(ttl * 1000)), method, route]


def complete_args(
    scope: str, key: str, fingerprint: str, fence: int, response: StoredResponse, ttl: float
) -> list[Any]:
    stored = response._replace(body=seal(response.body))
    tag = authentication.sign(
        scope, key, fingerprint=fingerprint, fence=fence, stored=stored, ttl=ttl
    )
    return [
        fence,
        stored.status,
        stored.headers_json(),
        stored.body,
        max(1, int(ttl * 1000)),
        tag,
    ]


def recovery_args(fence: int, name: str, data: Any) -> list[Any]:
    return [fence, name, json.dumps(data) if data is not None else ""]


def key_state_from_fields(
    fields: list[Any], scope: str, key: str, fingerprint: str, remaining: Callable[[], Any]
) -> KeyState | None:
    """The :class:`KeyState` of a record's ``HMGET`` of ``LOOKUP_FIELDS`` (None: absent);
    ``remaining`` gives its ``PTTL``, read only for a completed record."""
    state, fp, lease, status, headers, body, point, data, fence, tag = fields
    if state is None:
        return None
    if as_text(state) == "c":
        found = [fp, fence, tag, status, headers, body]
        return _completed(scope, key, fingerprint, found, int(remaining()))
    if as_text(fp) != fingerprint:
        return KeyState(ClaimStatus.MISMATCH, fingerprint=as_text(fp))
    left = (int(lease or 0) - now_ms()) / 1000
    return KeyState(
        ClaimStatus.IN_PROGRESS,
        retry_after=max(0.0, left),
        recovery_point=as_text(point),
        recovery_data=_data(data),
    )
