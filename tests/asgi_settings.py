"""Settings of the real servers the interface matrix starts (uvicorn): the test settings,
the matrix URLs, the middleware installed, and the mode from ``MATRIX_MODE``."""

from __future__ import annotations

import os

from tests.settings import *  # noqa: F403
from tests.settings import MIDDLEWARE

ROOT_URLCONF = "tests.urls"
# The matrix logs in with a session cookie and a token, as a script would; CSRF is not
# what it tests.
MIDDLEWARE = [
    *(m for m in MIDDLEWARE if m != "django.middleware.csrf.CsrfViewMiddleware"),
    "idempotency.IdempotencyMiddleware",
]
IDEMPOTENCY = {"MODE": os.environ.get("MATRIX_MODE", "auto")}
DEBUG = False
