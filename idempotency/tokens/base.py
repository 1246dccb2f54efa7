"""What every token backend and view shares: limits, outcomes, scopes and hashing."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

#: Seconds a consumed token keeps answering "used" at least (even past its expiry).
TOMBSTONE_SECONDS = 60
#: Longest purpose accepted (``SubmitToken.purpose``).
MAX_PURPOSE_LENGTH = 100
#: Longest token looked at; anything longer is invalid without a lookup.
MAX_TOKEN_LENGTH = 256

OK, USED, INVALID = "ok", "used", "invalid"


@dataclass(frozen=True, slots=True)
class IssuedToken:
    token: str
    scope: str
    purpose: str
    expires_at: datetime


# -- scope, purpose, hashing -------------------------------------------------------------


def token_scope(user_or_scope: Any) -> str | None:
    """``user:<pk>`` for an authenticated user, the string itself for a scope, else None."""
    if isinstance(user_or_scope, str):
        return user_or_scope or None
    if user_or_scope is None or getattr(user_or_scope, "is_anonymous", False):
        return None
    pk = getattr(user_or_scope, "pk", None)
    if pk is None:
        return None
    return f"user:{pk}"


def check_purpose(purpose: Any) -> str:
    if not isinstance(purpose, str) or not purpose:
        raise ValueError("A submit token's purpose must be a non-empty string")
    if len(purpose) > MAX_PURPOSE_LENGTH:
        raise ValueError(f"A submit token's purpose is at most {MAX_PURPOSE_LENGTH} characters")
    return purpose


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
