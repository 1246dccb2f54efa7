"""One-time submit tokens: issue one with a form, consume it atomically with the submission
(how to use them and how each backend consumes: docs/howto/submit-tokens.md)."""

from idempotency.tokens.base import (
    IssuedToken,
    TokenBackend,
    consume_submit_token,
    get_token_backend,
    issue_submit_token,
    issue_token,
    purge_expired_submit_tokens,
    token_backends,
    token_scope,
)
from idempotency.tokens.database import DatabaseTokens
from idempotency.tokens.redis import RedisTokens
from idempotency.tokens.views import require_submit_token

__all__ = [
    "DatabaseTokens",
    "IssuedToken",
    "RedisTokens",
    "TokenBackend",
    "consume_submit_token",
    "get_token_backend",
    "issue_submit_token",
    "issue_token",
    "purge_expired_submit_tokens",
    "require_submit_token",
    "token_backends",
    "token_scope",
]
