"""The ``OPTIONS`` every Redis backend (store, tokens, locks) shares; its redis-py client
is built by :class:`~idempotency.core.redis_clients.RedisConnector`."""

from __future__ import annotations

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

#: Options of the redis-py client every Redis backend takes (any other redis-py connection
#: option is accepted by the constructor, unchecked).
CLIENT_OPTIONS = {
    "max_connections": MAX_CONNECTIONS,
    "pool_timeout": Setting(5.0, "Seconds a caller waits for a free connection.", "seconds"),
    "retries": Setting(
        3,
        "Times a command that failed on a broken connection or timed out is sent again.",
        "integer",
        inclusive=True,
    ),
    "socket_timeout": Setting(
        5.0, "Seconds a command may wait for its reply (redis-py).", "seconds"
    ),
    "socket_connect_timeout": Setting(
        5.0, "Seconds a connection may take to open (redis-py).", "seconds"
    ),
    "ssl_ca_certs": Setting(
        None,
        "rediss://: the CA file its certificate is checked against.",
        "text",
        nullable=True,
    ),
    "cluster": Setting(False, "True for a Redis Cluster (redis-py's RedisCluster).", "bool"),
}
