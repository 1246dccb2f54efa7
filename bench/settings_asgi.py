"""Settings of the ASGI benchmark server (uvicorn): the benchmark's settings with one
async middleware, the bearer-token caller of :mod:`bench.benchapp.async_views`, and the
async views' URLs. No sync middleware: one would make Django run every request's view
chain through a thread (``Asynchronous handler adapted for middleware``).

On PostgreSQL the database goes through Django's connection pool (psycopg's), as Django
advises under ASGI: each request's database work runs in a thread of that request's
own, so without a pool every async request that touches the database opens (and
closes) a connection of its own, and 32 connections on two workers exhaust the server's
``max_connections`` (answered 503 by the store)."""

from __future__ import annotations

from bench.settings import *  # noqa: F403

if DATABASES["default"]["ENGINE"].endswith("postgresql"):  # noqa: F405
    DATABASES["default"]["OPTIONS"] = {  # noqa: F405
        **DATABASES["default"].get("OPTIONS", {}),  # noqa: F405
        "pool": {"min_size": 4, "max_size": 20},
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405 - the pool keeps them

MIDDLEWARE = ["bench.benchapp.async_views.TokenUserMiddleware"]
ROOT_URLCONF = "bench.urls_asgi"
ASGI_APPLICATION = "bench.asgi.application"
