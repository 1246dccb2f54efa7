"""Submit tokens: the backend contract (:class:`TokenBackend`), the configured backends by
alias (:data:`token_backends`), and issuing, consuming and purging tokens on them."""

from __future__ import annotations

import abc
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.exceptions import (
    SubmitTokenInvalid,
    SubmitTokenUsed,
)
from idempotency.scopes import principal_scope
from idempotency.utils.backends import BackendHandler, Configurable

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


#: The submit-token backends by alias (``IDEMPOTENCY["TOKENS"]``), as ``caches``:
#: ``token_backends["default"]``; each ``BACKEND`` a subclass of
#: :class:`~idempotency.tokens.base.TokenBackend`.
token_backends: BackendHandler[TokenBackend] = BackendHandler(
    "TOKENS", "submit-token backend", lambda: TokenBackend
)


def get_token_backend(backend: str | TokenBackend | None = None) -> TokenBackend:
    """The token backend ``backend`` names: an alias of ``TOKENS`` (None: ``"default"``)
    or a backend instance, returned as it is.

    Raises:
        ImproperlyConfigured: No such alias, or its entry cannot be used (the system
            checks report the same at startup).
    """
    return token_backends.get(backend)


# -- the API -----------------------------------------------------------------------------


def issue_token(*, user_or_scope: Any, purpose: str, ttl: float | None = None) -> IssuedToken:
    """:func:`issue_submit_token`, also telling the scope and expiry."""
    scope = token_scope(user_or_scope)
    if scope is None:
        raise ValueError(
            "Submit tokens are bound to an authenticated user or an explicit scope string; "
            f"got {user_or_scope!r}"
        )
    purpose = check_purpose(purpose)
    seconds = float(idempotency_settings.SUBMIT_TOKEN_TTL if ttl is None else ttl)
    if seconds <= 0:
        raise ValueError("A submit token's ttl must be positive")
    token = secrets.token_urlsafe(32)
    expires_at = get_token_backend().issue(hash_token(token), scope, purpose, seconds)
    return IssuedToken(token=token, scope=scope, purpose=purpose, expires_at=expires_at)


def issue_submit_token(*, user_or_scope: Any, purpose: str, ttl: float | None = None) -> str:
    """A new one-time token for ``purpose``, bound to a principal (named as scopes name it:
    ``auth.user:<pk>``) or a scope string.

    Only its SHA-256 hash is stored; the token itself is returned once, here.

    Args:
        user_or_scope: The principal the token is for (an authenticated user, or another
            model instance a DRF authentication returns), or a scope string of your own.
        purpose: What the token is for, such as ``"order-form"``; it is consumed only
            for that purpose.
        ttl: Seconds the token lives (default ``SUBMIT_TOKEN_TTL``).

    Returns:
        The token, to render into the form or send to the client.

    Raises:
        StoreUnavailable: The token backend cannot be reached.
    """
    return issue_token(user_or_scope=user_or_scope, purpose=purpose, ttl=ttl).token


def consume_submit_token(*, token: str, user_or_scope: Any, purpose: str) -> None:
    """Use ``token`` up, atomically: of concurrent consumers exactly one returns.

    Args:
        token: The token the client sent back.
        user_or_scope: The user (or scope string) it must have been issued to.
        purpose: The purpose it must have been issued for.

    Raises:
        SubmitTokenUsed: (409) It was already consumed.
        SubmitTokenInvalid: (400) It is unknown, expired, bound to another scope or
            issued for another purpose (which never consumes it).
        StoreUnavailable: The token backend cannot be reached.
    """
    scope = token_scope(user_or_scope)
    if (
        scope is None
        or not isinstance(token, str)
        or not token
        or len(token) > MAX_TOKEN_LENGTH
        or not isinstance(purpose, str)
        or not purpose
    ):
        raise SubmitTokenInvalid()
    outcome = get_token_backend().consume(hash_token(token), scope, purpose)
    if outcome == OK:
        return
    if outcome == USED:
        signals.token_used.send(sender=None, scope=scope, purpose=purpose)
        raise SubmitTokenUsed()
    raise SubmitTokenInvalid()


def purge_expired_submit_tokens(
    *, batch_size: int | None = None, now: datetime | None = None
) -> int:
    """Delete expired submit tokens of the backend (rows of the database backend), in batches.

    A consumed row is kept as a tombstone until it is both expired and a minute old
    (``TOMBSTONE_SECONDS``), so a late second use still answers "used", not "invalid".
    Redis tokens expire by themselves: with the Redis backend nothing is deleted.

    Args:
        batch_size: Rows deleted per batch (default: the ``PURGE_BATCH_SIZE`` setting).
        now: The moment to judge expiry by (default: now).

    Returns:
        The number of tokens deleted (0 with the Redis backend).
    """
    backend = get_token_backend()
    size = int(batch_size or idempotency_settings.PURGE_BATCH_SIZE)
    return backend.purge(now=now or timezone.now(), batch_size=max(1, size))
