"""One-time submit tokens: a form or client action can be submitted once per token.

The server issues a token when it renders a form (or when a client asks, with
:class:`SubmitTokenIssueView`); the submission carries it back in the
``SUBMIT_TOKEN_HEADER`` header (``X-Submit-Token``) and consuming it is **one
atomic operation**, so of two identical submissions (a double click, a client
retry) exactly one gets through; the other is answered 409::

    from idempotency import consume_submit_token, issue_submit_token

    token = issue_submit_token(user_or_scope=request.user, purpose="checkout")
    ...
    consume_submit_token(token=token, user_or_scope=request.user, purpose="checkout")
    # raises SubmitTokenUsed (409) on a second use, SubmitTokenInvalid (400) when the
    # token is unknown, expired, issued to someone else or for another purpose

A token is 256 random bits (URL-safe base64). Only its SHA-256 hash is stored,
bound to the scope it was issued to (``user:<pk>`` for a user, or any string)
and its purpose; it lives ``SUBMIT_TOKEN_TTL`` seconds (600).

Backends (``SUBMIT_TOKEN_BACKEND``):

``"database"`` (default)
    The :class:`~idempotency.models.SubmitToken` table. Consuming is one
    ``UPDATE … SET consumed_at = now WHERE token_hash = … AND scope = … AND
    purpose = … AND consumed_at IS NULL AND expires_at > now`` judged by its row
    count; the consumed row is the tombstone that tells "used" from "never
    existed". Inside ``transaction.atomic()`` the consumption commits (or rolls
    back) with the caller's writes. Expired rows are deleted by
    :func:`purge_expired_submit_tokens` (Celery beat task
    ``idempotency.purge_expired_submit_tokens``).
``"redis"``
    The django-redis connection of ``REDIS_ALIAS``. Consuming is one Lua script
    that compares the binding, deletes the token and writes a tombstone.

A consumed token answers "used" (409) until its expiry, and at least
:data:`TOMBSTONE_SECONDS` after its use; after that it is simply invalid (400).
Tokens issued for one scope and purpose are invalid for any other, and a
foreign or wrong-purpose attempt never consumes the token.

In views: :func:`require_submit_token` (function views, DRF methods) and
:class:`SubmitTokenPermission` (DRF views) consume the token after
authentication; a consumed token is spent even when the view then fails, so the
client asks for a new one (this is what makes the token at-most-once).
"""

from idempotency.tokens.api import (
    consume_submit_token,
    issue_submit_token,
    issue_token,
    purge_expired_submit_tokens,
)
from idempotency.tokens.base import IssuedToken, token_scope
from idempotency.tokens.database import DatabaseTokens
from idempotency.tokens.redis import RedisTokens
from idempotency.tokens.views import (
    SubmitTokenIssueView,
    SubmitTokenPermission,
    require_submit_token,
)

__all__ = [
    "DatabaseTokens",
    "IssuedToken",
    "RedisTokens",
    "SubmitTokenIssueView",
    "SubmitTokenPermission",
    "consume_submit_token",
    "issue_submit_token",
    "issue_token",
    "purge_expired_submit_tokens",
    "require_submit_token",
    "token_scope",
]
