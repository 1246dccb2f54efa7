"""drf-idempotency 1.0.0 with its Redis backend (``SET NX``), as its README configures it.

``IdempotencyMiddleware`` last in ``MIDDLEWARE``, ``BACKEND`` = ``RedisBackend`` with
``BACKEND_OPTIONS = {"url": ...}``; the app itself is not needed for Redis only.
"""

from __future__ import annotations

from bench.env import REDIS_URL
from bench.settings_peers import *  # noqa: F403
from bench.settings_peers import MIDDLEWARE

MIDDLEWARE = [*MIDDLEWARE, "drf_idempotency.middleware.IdempotencyMiddleware"]

IDEMPOTENCY = {  # drf-idempotency's setting (it shares our setting's name)
    "BACKEND": "drf_idempotency.backends.redis.RedisBackend",
    "BACKEND_OPTIONS": {"url": REDIS_URL},
}
