"""Issue, consume and purge submit tokens on the configured backend."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from django.utils import timezone

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.exceptions import (
    SubmitTokenInvalid,
    SubmitTokenUsed,
)
from idempotency.tokens.base import (
    MAX_TOKEN_LENGTH,
    OK,
    USED,
    IssuedToken,
    TokenBackend,
    check_purpose,
    hash_token,
    token_scope,
)
from idempotency.utils.backends import BackendHandler

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
