"""Redis Cluster for django-redis: a connection factory that hands out redis-py's cluster client.

django-redis speaks to one server (or a primary and read replicas) through
``redis.Redis``; it has no cluster client of its own. Its ``CONNECTION_FACTORY``
option is the seam: with this factory, ``get_redis_connection(alias)`` returns a
``redis.cluster.RedisCluster`` that discovers the slots from the ``LOCATION`` node,
follows ``MOVED``/``ASK`` redirections and refreshes the topology after a failover.
``RedisStore``, the response cache, Redis submit tokens and Redis locks then run on
the cluster unchanged::

    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://10.0.0.1:6379/0",          # any node; database 0 only
            "OPTIONS": {
                "CONNECTION_FACTORY": "idempotency.redis_cluster.ClusterConnectionFactory",
                # optional keyword arguments of redis.cluster.RedisCluster:
                "CLUSTER_KWARGS": {"cluster_error_retry_attempts": 3},
            },
        }
    }

Every script of the library touches one key, or keys sharing one hash tag
(``{...}``), so nothing raises ``CROSSSLOT``. Reads always go to primaries: reading
an idempotency record from a replica could return a stale answer, so replica reads
(``read_from_replicas``, ``load_balancing_strategy``) are refused here.

Only what the library uses is guaranteed on a cluster: django-redis cache calls that
take several keys at once (``get_many``, ``delete_many``, ``keys``) may raise
``CROSSSLOT`` there, as on any Redis Cluster.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django_redis.pool import ConnectionFactory

__all__ = ["ClusterConnectionFactory"]

_REFUSED = ("read_from_replicas", "load_balancing_strategy")


class ClusterConnectionFactory(ConnectionFactory):  # type: ignore[misc]
    """django-redis ``CONNECTION_FACTORY`` whose connections are ``RedisCluster`` clients.

    One client per location and options, shared by every thread of the process (the
    client keeps a connection pool per node and is thread-safe), as django-redis
    shares its connection pools.
    """

    _clusters: dict[str, Any] = {}
    _lock = threading.Lock()

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        kwargs = dict(options.get("CLUSTER_KWARGS") or {})
        refused = [name for name in _REFUSED if kwargs.get(name)]
        if refused:
            raise ImproperlyConfigured(
                f"ClusterConnectionFactory: {', '.join(refused)} would read idempotency "
                "records from replicas, which may lag behind their primary; remove it."
            )
        self.cluster_kwargs = kwargs

    def connect(self, url: str) -> Any:
        params = self.make_connection_params(url)
        params.pop("parser_class", None)
        key = repr(sorted({**params, **self.cluster_kwargs}.items()))
        with self._lock:
            client = self._clusters.get(key)
            if client is None:
                from redis.cluster import RedisCluster

                url = params.pop("url")
                client = RedisCluster.from_url(url, **params, **self.cluster_kwargs)
                self._clusters[key] = client
        return client

    def disconnect(self, connection: Any) -> None:
        """Shared by the whole process: the per-node pools stay open (as django-redis's do)."""
