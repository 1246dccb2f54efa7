"""Settings of the test project served by a real multi-process server (gunicorn).

The test settings, routed to the test views, with the idempotency settings the
test hands over in ``IDEMPOTENCY_TEST_SETTINGS`` (JSON).
"""

from __future__ import annotations

import json
import os

from tests.settings import *  # noqa: F403

ROOT_URLCONF = "tests.urls"
IDEMPOTENCY = json.loads(os.environ.get("IDEMPOTENCY_TEST_SETTINGS", "{}"))
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
DEBUG = False
