"""Fixtures of the multi-node tests: a private Redis Cluster, PgBouncer, the execution log.

The Redis Cluster (6 ``redis-server`` processes: 3 primaries, 3 replicas) and PgBouncer
are started on free loopback ports by these fixtures and stopped after the tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from tests.conftest import REQUIRE_SERVICES
from tests.scale import views
from tests.scale.servers import PgBouncerServer, RedisClusterServer

REDIS_STORE = "idempotency.stores.RedisStore"
CLUSTER_FACTORY = "idempotency.redis_cluster.ClusterConnectionFactory"


def _missing(reason: str) -> None:
    if REQUIRE_SERVICES:
        pytest.fail(f"required service missing: {reason}")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _scale_urls(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.scale.urls"


@pytest.fixture
def execution_log(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "executions.log"
    views.EXECUTIONS["path"] = str(path)
    yield path
    views.EXECUTIONS["path"] = ""


def start_cluster() -> RedisClusterServer:
    if not RedisClusterServer.available():
        _missing("needs redis-server and redis-cli to start a Redis Cluster")
    return RedisClusterServer().start()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterServer]:
    cluster = start_cluster()
    yield cluster
    cluster.stop()


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


@pytest.fixture
def on_cluster(redis_cluster: RedisClusterServer) -> Iterator[RedisClusterServer]:
    """RedisStore, Redis tokens and Redis locks on the cluster (``REDIS_ALIAS='cluster'``)."""
    redis_cluster.flush()
    with override_settings(
        CACHES=cluster_caches(redis_cluster),
        IDEMPOTENCY={
            "REDIS_ALIAS": "cluster",
            "STORE": REDIS_STORE,
            "MODE": "lease",
            "SUBMIT_TOKEN_BACKEND": "redis",
            "LOCK_BACKEND": "redis",
        },
    ):
        yield redis_cluster


@pytest.fixture
def pgbouncer_factory() -> Iterator[Any]:
    """Start PgBouncers (transaction pooling) in front of the test PostgreSQL server."""
    from django.db import connection

    if connection.vendor != "postgresql":
        _missing("needs PostgreSQL: set DATABASE_URL=postgres://...")
    if not PgBouncerServer.available():
        _missing("needs pgbouncer (apt-get install pgbouncer)")
    started: list[PgBouncerServer] = []

    def start(pool_size: int = 10) -> PgBouncerServer:
        params = connection.settings_dict
        bouncer = PgBouncerServer(
            pg_host=params["HOST"] or "127.0.0.1",
            pg_port=int(params["PORT"] or 5432),
            pg_user=params["USER"] or "postgres",
            pool_size=pool_size,
        ).start()
        started.append(bouncer)
        return bouncer

    yield start
    for bouncer in started:
        bouncer.stop()
