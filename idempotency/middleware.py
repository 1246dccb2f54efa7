"""Compatibility path: the middleware lives in :mod:`idempotency.http.middleware`.

``"idempotency.middleware.IdempotencyMiddleware"`` in ``MIDDLEWARE`` keeps working.
"""

from idempotency.http.middleware import IdempotencyMiddleware

__all__ = ["IdempotencyMiddleware"]
