"""What every token backend and view shares: the backend's base class, limits, outcomes,
scopes and hashing."""

from __future__ import annotations

import abc
import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from idempotency.scopes import principal_scope
from idempotency.utils.backends import Configurable

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


class TokenBackend(Configurable, abc.ABC):
    """Where submit tokens live: the base class of every ``BACKEND`` of ``TOKENS``.

    Name a subclass by its dotted path as the ``BACKEND`` of an alias of
    ``IDEMPOTENCY["TOKENS"]``; it is made with its entry's ``LOCATION`` and ``OPTIONS`` as
    keyword arguments (its ``options`` and ``location_schemes`` say which it takes:
    :mod:`idempotency.utils.backends`), once per process (until the settings change),
    and shared by every thread, so it keeps no per-call state. The backend sees only a
    token's SHA-256 hash, never the token. Built in:
    ``idempotency.tokens.DatabaseTokens`` (the default) and
    ``idempotency.tokens.RedisTokens``.

    Methods subclasses must implement: :meth:`issue` and :meth:`consume`. They may
    override :meth:`purge`.
    """

    @abc.abstractmethod
    def issue(self, token_hash: str, scope: str, purpose: str, ttl: float) -> datetime:
        """Keep a new token bound to ``scope`` and ``purpose`` for ``ttl`` seconds.

        Returns:
            When it expires.

        Raises:
            StoreUnavailable: The backend cannot be reached.
        """

    @abc.abstractmethod
    def consume(self, token_hash: str, scope: str, purpose: str) -> str:
        """Use the token up, atomically: of concurrent calls for one token exactly one
        returns ``OK``.

        Returns:
            ``OK`` (it was unused, unexpired and bound to ``scope`` and ``purpose``:
            it is used now), ``USED`` (it was consumed already; keep answering so at
            least ``TOMBSTONE_SECONDS`` after the consumption, even past its expiry)
            or ``INVALID`` (unknown, expired, or bound to another scope or purpose,
            which never consumes it).

        Raises:
            StoreUnavailable: The backend cannot be reached.
        """

    def purge(self, *, now: datetime, batch_size: int) -> int:
        """Delete the tokens expired at ``now`` (and their tombstones, once
        ``TOMBSTONE_SECONDS`` old), ``batch_size`` at a time; how many went.

        The default deletes nothing: for a backend whose tokens expire by themselves."""
        return 0


# -- scope, purpose, hashing -------------------------------------------------------------


def token_scope(user_or_scope: Any) -> str | None:
    """The scope a token is bound to: a string is itself; an authenticated principal (a
    user, an API client's model instance) is named as the default scope names it
    (``auth.user:1``, :func:`idempotency.scopes.principal_scope`), so an API client and
    a user with one primary key never share tokens; anything else is None."""
    if isinstance(user_or_scope, str):
        return user_or_scope or None
    if user_or_scope is None or getattr(user_or_scope, "is_anonymous", False):
        return None
    return principal_scope(user_or_scope)


def check_purpose(purpose: Any) -> str:
    if not isinstance(purpose, str) or not purpose:
        raise ValueError("A submit token's purpose must be a non-empty string")
    if len(purpose) > MAX_PURPOSE_LENGTH:
        raise ValueError(f"A submit token's purpose is at most {MAX_PURPOSE_LENGTH} characters")
    return purpose


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
