"""Where the benchmark's services are: ``BENCH_DATABASE_URL`` and ``BENCH_REDIS_URL``.

Defaults: a PostgreSQL database ``idem_bench`` (local, user postgres, trust auth) and
Redis database 11, both on 127.0.0.1. The benchmark creates the database when missing
and owns both: it truncates its tables and flushes that Redis database.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit

DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/idem_bench")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/11")


def database_settings(url: str = DATABASE_URL) -> dict[str, Any]:
    """A ``DATABASES`` entry for a ``postgres://`` URL, with persistent connections."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ValueError(f"The benchmark needs PostgreSQL, not {parts.scheme!r}")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "idem_bench",
        "USER": unquote(parts.username or "postgres"),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "127.0.0.1",
        "PORT": str(parts.port or 5432),
        "CONN_MAX_AGE": None,
        "CONN_HEALTH_CHECKS": False,
    }
