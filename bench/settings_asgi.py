"""Settings of the ASGI benchmark server (uvicorn): the benchmark's settings with one
async middleware, the bearer-token caller of :mod:`bench.benchapp.async_views`, and the
async views' URLs. No sync middleware: one would make Django run every request's view
chain through a thread (``Asynchronous handler adapted for middleware``)."""

from __future__ import annotations

from bench.settings import *  # noqa: F403

MIDDLEWARE = ["bench.benchapp.async_views.TokenUserMiddleware"]
ROOT_URLCONF = "bench.urls_asgi"
ASGI_APPLICATION = "bench.asgi.application"
