"""drf-idempotency 1.0.0 with its database backend: the README's quick start.

``drf_idempotency`` installed and migrated, its ``IdempotencyMiddleware`` last in
``MIDDLEWARE``, ``BACKEND`` = ``DatabaseBackend``; everything else default.
"""

from __future__ import annotations

from bench.settings_peers import *  # noqa: F403
from bench.settings_peers import INSTALLED_APPS, MIDDLEWARE

INSTALLED_APPS = [*INSTALLED_APPS, "drf_idempotency"]
MIDDLEWARE = [*MIDDLEWARE, "drf_idempotency.middleware.IdempotencyMiddleware"]

IDEMPOTENCY = {  # drf-idempotency's setting (it shares our setting's name)
    "BACKEND": "drf_idempotency.backends.database.DatabaseBackend",
}
