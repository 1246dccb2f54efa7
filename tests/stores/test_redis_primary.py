"""Records are read from the primary only: against a private primary and a real replica
that lags (its replication runs through a proxy that holds the stream), a read that went
to the replica would be stale, and the store's claims, lookups and the response cache's
reads are not."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from django.core.cache import caches
from django.test import override_settings

from idempotency.stores.base import ClaimStatus, StoredResponse
from idempotency.stores.redis import RedisStore
from idempotency.utils.caches import RawCache
from tests.support.faults import private_redis
from tests.support.redis_proxy import ReplyProxy

pytestmark = pytest.mark.chaos

SCOPE = "auth.user:1"
RESPONSE = StoredResponse(201, [], b'{"id": 1}')


def _in_sync(replica: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = replica.info("replication")
        if info.get("master_link_status") == "up" and info.get("master_sync_in_progress") == 0:
            return
        time.sleep(0.05)  # real time: waiting for a real replica to sync
    raise AssertionError(f"the replica never synced: {info}")


def test_a_lagging_replica_is_never_read() -> None:
    with private_redis() as primary:
        proxy = ReplyProxy(primary.port)
        try:
            with private_redis(extra=("--replicaof", "127.0.0.1", str(proxy.port))) as replica:
                replica_client: Any = replica.client()
                _in_sync(replica_client)
                proxy.pause()  # from now on the replica lags
                location = [primary.url, replica.url]  # Django's RedisCache: first is primary
                cache = {
                    "BACKEND": "django.core.cache.backends.redis.RedisCache",
                    "LOCATION": location,
                }
                with override_settings(CACHES={"default": cache, "replicated": cache}):
                    store = RedisStore(cache="replicated")
                    key = f"k-{uuid.uuid4()}"
                    first = store.claim(SCOPE, key, fingerprint="fp", lease=30, ttl=60)
                    assert store.complete(SCOPE, key, fence=first.fence, response=RESPONSE, ttl=60)
                    raw = RawCache(caches["replicated"], "replicated")
                    raw.set("response", b"stored", 60)
                    # a read on the replica would be stale: it has neither
                    assert replica_client.exists(store.record_key(SCOPE, key)) == 0
                    assert replica_client.dbsize() == 0
                    # the store and the response cache read the primary
                    replay = store.claim(SCOPE, key, fingerprint="fp", lease=30, ttl=60)
                    assert replay.status is ClaimStatus.COMPLETED
                    looked = store.lookup(SCOPE, key, fingerprint="fp")
                    assert looked is not None and looked.status is ClaimStatus.COMPLETED
                    assert raw.get("response") == b"stored"
        finally:
            proxy.close()
