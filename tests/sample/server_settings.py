"""Settings of the sample served by gunicorn in the client and checkout tests.

The demo's (the naive pay endpoint routed, for the control runs) without its
artificial network delay: the tests bring their own faults (``tests/proxy.py``).
``IDEMPOTENCY_MODE`` picks the protected views' mode (``auto``, ``lease``, ...).
"""

from __future__ import annotations

import os

from config.settings_demo import *  # noqa: F403
from config.settings_demo import IDEMPOTENCY

DEMO_RESPONSE_DELAY = 0.0
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if os.environ.get("IDEMPOTENCY_MODE"):
    IDEMPOTENCY["MODE"] = os.environ["IDEMPOTENCY_MODE"]
