"""Where the benchmark's services are: ``BENCH_DATABASE_URL`` and ``BENCH_REDIS_URL``.

Defaults: a PostgreSQL database ``idem_bench`` (local, user postgres, trust auth) and
Redis database 11, both on 127.0.0.1. The benchmark creates the database when missing
and owns both: it truncates its tables and flushes that Redis database.

``BENCH_SERVER_SIDE_BINDING=1`` runs every variant (the references too) with Django's
``server_side_binding`` option and ``prepare_threshold`` 5: psycopg then binds parameters
on the server and prepares a statement it has run five times, so PostgreSQL stops
parsing and planning it again (Django's default is client-side binding, no prepared
statements, which keeps transaction-pooling proxies working).

``BENCH_DATABASE_URL=mysql://root@127.0.0.1:3306/idem_bench`` runs it on MySQL or
MariaDB (mysqlclient, the `mysql` extra), with the sample's charset and strict mode.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit

DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/idem_bench")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/11")
SERVER_SIDE_BINDING = os.environ.get("BENCH_SERVER_SIDE_BINDING", "") not in ("", "0")


def database_settings(url: str = DATABASE_URL) -> dict[str, Any]:
    """A ``DATABASES`` entry for a ``postgres://`` or ``mysql://`` URL, with persistent
    connections."""
    parts = urlsplit(url)
    if parts.scheme in {"mysql", "mariadb"}:
        return {
            "ENGINE": "django.db.backends.mysql",
            "NAME": unquote(parts.path.lstrip("/")) or "idem_bench",
            "USER": unquote(parts.username or "root"),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "127.0.0.1",
            "PORT": str(parts.port or 3306),
            "CONN_MAX_AGE": None,
            "CONN_HEALTH_CHECKS": False,
            "OPTIONS": {
                "charset": "utf8mb4",
                "init_command": "SET sql_mode = 'STRICT_TRANS_TABLES'",
            },
        }
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ValueError(f"The benchmark needs PostgreSQL or MySQL, not {parts.scheme!r}")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "idem_bench",
        "USER": unquote(parts.username or "postgres"),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "127.0.0.1",
        "PORT": str(parts.port or 5432),
        "CONN_MAX_AGE": None,
        "CONN_HEALTH_CHECKS": False,
        "OPTIONS": (
            {"server_side_binding": True, "prepare_threshold": 5} if SERVER_SIDE_BINDING else {}
        ),
    }
