"""WAIT on a single Redis (REDIS_URL, which has no replicas): a claim that no replica
acknowledged is released and refused; without WAIT nothing changes."""

from __future__ import annotations

import uuid

import pytest

from idempotency.exceptions import StoreNotDurable
from idempotency.stores.base import ClaimStatus
from idempotency.stores.redis import RedisStore

pytestmark = pytest.mark.redis


def test_a_claim_no_replica_acknowledged_is_released_and_refused() -> None:
    key = f"wait-{uuid.uuid4()}"
    store = RedisStore(wait_replicas=1, wait_timeout=0.05)
    with pytest.raises(StoreNotDurable) as refused:
        store.claim("user:1", key, fingerprint="f", lease=30, ttl=60)
    assert refused.value.status_code == 503
    assert refused.value.extra == {"replicas": 1, "acknowledged": 0}
    assert store.lookup("user:1", key, fingerprint="f") is None  # released: a retry may run
    plain = RedisStore(wait_replicas=0)
    assert plain.claim("user:1", key, fingerprint="f", lease=30, ttl=60).status is (
        ClaimStatus.CLAIMED
    )
    # a duplicate's claim is not a write of its own: it is answered, never refused
    assert store.claim("user:1", key, fingerprint="f", lease=30, ttl=60).status is (
        ClaimStatus.IN_PROGRESS
    )
