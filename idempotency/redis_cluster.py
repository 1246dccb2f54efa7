"""Redis Cluster for django-redis: a ``CONNECTION_FACTORY`` that hands out redis-py's cluster
client, primaries only (setup and limits: docs/howto/several-servers.md)."""

from __future__ import annotations

import threading
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django_redis.pool import ConnectionFactory

__all__ = ["ClusterConnectionFactory"]

_REFUSED = ("read_from_replicas", "load_balancing_strategy")


# django-redis ships no type hints: its ConnectionFactory is Any to the type checker
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
