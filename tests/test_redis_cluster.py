"""ClusterConnectionFactory (``idempotency.redis_cluster``), django-redis' connection
factory for a Redis Cluster: what it refuses and how it configures its clients; a real
cluster is in tests/scale/test_redis_cluster.py."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

pytest.importorskip("django_redis")

from idempotency.redis_cluster import ClusterConnectionFactory  # noqa: E402 - needs django-redis


@pytest.mark.parametrize("option", ["read_from_replicas", "load_balancing_strategy"])
def test_reading_from_replicas_is_refused(option: str) -> None:
    """A replica may lag behind its primary: a record read there may be out of date."""
    with pytest.raises(ImproperlyConfigured, match=option):
        ClusterConnectionFactory({"CLUSTER_KWARGS": {option: True}})


def test_its_cluster_options_are_kept_for_every_client() -> None:
    factory = ClusterConnectionFactory({"CLUSTER_KWARGS": {"read_from_replicas": False}})
    assert factory.cluster_kwargs == {"read_from_replicas": False}
    assert ClusterConnectionFactory({}).cluster_kwargs == {}
