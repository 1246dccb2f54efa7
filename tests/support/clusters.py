"""A private Redis Cluster for the tests (see ``tests/scale/servers.py``), and caches on it."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from tests.scale.servers import RedisClusterServer
from tests.support.services import missing
from tests.support.stores import REDIS_STORE

__all__ = ["REDIS_STORE", "cluster_caches", "crossslot_errors", "start_cluster"]

CLUSTER_FACTORY = "idempotency.redis_cluster.ClusterConnectionFactory"


def start_cluster() -> RedisClusterServer:
    """3 primaries and 3 replicas on free loopback ports (skipped without redis-server)."""
    if not RedisClusterServer.available():
        missing("needs redis-server and redis-cli to start a Redis Cluster")
    return RedisClusterServer().start()


def cluster_caches(cluster: RedisClusterServer) -> dict[str, Any]:
    """The project's caches plus ``cluster``, a django-redis cache on the Redis Cluster."""
    return {
        **settings.CACHES,
        "cluster": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": cluster.url,
            "OPTIONS": {"CONNECTION_FACTORY": CLUSTER_FACTORY},
        },
    }


def crossslot_errors(cluster: RedisClusterServer) -> list[dict[str, Any]]:
    """The CROSSSLOT error counts of the cluster's live nodes (``INFO errorstats`` counts
    every error reply since the node started): empty while every command kept to one slot."""
    found = []
    for node in cluster.live_nodes():
        errors = node.client().info("errorstats")
        if any("CROSSSLOT" in name for name in errors):
            found.append(errors)
    return found
