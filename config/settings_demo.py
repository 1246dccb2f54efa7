"""Settings of the ``retry_storm`` demo server: the sample's, plus the naive endpoint
and a slow network. DEMO ONLY; ``manage.py retry_storm`` starts a server with them."""

from __future__ import annotations

import os

from config.settings import *  # noqa: F403
from config.settings import MIDDLEWARE

ROOT_URLCONF = "config.urls_demo"
MIDDLEWARE = ["payments.demo.SlowNetworkMiddleware", *MIDDLEWARE]
#: Longest random delay of a response, in seconds (the client's timeouts fire in it).
DEMO_RESPONSE_DELAY = float(os.environ.get("DEMO_RESPONSE_DELAY", "0.4"))
