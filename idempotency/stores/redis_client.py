"""The ``OPTIONS`` every Redis backend (store, tokens, locks) shares; its redis-py client
is built by :class:`~idempotency.core.redis_clients.RedisConnector`."""

from __future__ import annotations

from typing import Any

from idempotency.conf import Setting

#: The URL schemes of a Redis ``LOCATION``.
LOCATION_SCHEMES = ("redis", "rediss", "unix")


#: The ``max_connections`` option of the Redis backends.
MAX_CONNECTIONS = Setting(
    None,
    "The most connections its pool opens (per process, and per event loop); callers "
    "beyond it wait up to pool_timeout for one. None: 100.",
    "integer",
    nullable=True,
)

#: The ``cache`` option of the Redis backends: a ``CACHES`` alias whose Redis they use.
REDIS_CACHE = Setting(
    None,
    "Instead of LOCATION: the CACHES alias of a Redis cache (Django's RedisCache or "
    'django-redis) whose connection settings it uses. Neither: the cache "default".',
    "cache",
    nullable=True,
)

#: Options of the redis-py client every Redis backend takes; None leaves a cache's own
#: setting (or redis-py's default) in place.
CLIENT_OPTIONS = {
    "max_connections": MAX_CONNECTIONS,
    "pool_timeout": Setting(
        None, "Seconds a caller waits for a free connection. None: 5.", "seconds", nullable=True
    ),
    "retries": Setting(
        None,
        "Times a command that failed on a broken connection or timed out is sent again. None: 3.",
        "integer",
        inclusive=True,
        nullable=True,
    ),
    "socket_timeout": Setting(
        None,
        "Seconds a command may wait for its reply. None: the cache's, or 5.",
        "seconds",
        nullable=True,
    ),
    "socket_connect_timeout": Setting(
        None,
        "Seconds a connection may take to open. None: the cache's, or 5.",
        "seconds",
        nullable=True,
    ),
    "ssl_ca_certs": Setting(
        None,
        "rediss://: the CA file its certificate is checked against.",
        "text",
        nullable=True,
    ),
    "cluster": Setting(False, "True for a Redis Cluster (redis-py's RedisCluster).", "bool"),
}


def client_kwargs(**given: Any) -> dict[str, Any]:
    """The client options given (None and a False ``cluster`` left out)."""
    return {
        name: value for name, value in given.items() if value is not None and value is not False
    }
