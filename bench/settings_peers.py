"""What every peer library's server shares: our settings without our app.

A peer's server never loads ``idempotency``: its own app and middleware are the
only idempotency layer in the process, and its ``IDEMPOTENCY`` setting (drf-idempotency
uses that name too) cannot be read by ours.
"""

from __future__ import annotations

from bench.settings import *  # noqa: F403
from bench.settings import INSTALLED_APPS, MIDDLEWARE

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "idempotency"]
MIDDLEWARE = [*MIDDLEWARE]
ROOT_URLCONF = "bench.urls_peers"
IDEMPOTENCY = {}  # ours is not installed here
