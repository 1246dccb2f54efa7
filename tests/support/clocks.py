"""Time passing for a store's record, without a sleep."""

from __future__ import annotations

import time
from datetime import timedelta

from django.db.models import F

from idempotency.stores.base import BaseStore
from idempotency.stores.cache import CacheStore, dump_record, load_record
from idempotency.stores.database import DatabaseStore
from idempotency.stores.redis import RedisStore


def age(store: BaseStore, scope: str, key: str, seconds: float) -> None:
    """Move one record's creation, lease and expiry ``seconds`` into the past, on the clock
    that store judges them by (the database's rows, Redis' key TTL and lease field, the
    cache entry and its fields); one past its expiry is gone as the backend itself would
    drop it."""
    if isinstance(store, DatabaseStore):
        delta = timedelta(seconds=seconds)
        store.model.objects.filter(scope=scope, key=key).update(
            created_at=F("created_at") - delta,
            expires_at=F("expires_at") - delta,
            lease_expires_at=F("lease_expires_at") - delta,
        )
    elif isinstance(store, RedisStore):
        name, ms = store.record_key(scope, key), int(seconds * 1000)
        left = store.client.pttl(name)
        if left < 0:
            return
        lease = store.client.hget(name, "lease")
        if lease:  # a completed record's is empty
            store.client.hset(name, "lease", str(int(lease) - ms))
        if left <= ms:
            store.client.delete(name)
        else:
            store.client.pexpire(name, left - ms)
    else:
        assert isinstance(store, CacheStore)
        name = store.record_key(scope, key)
        raw = store.raw.get(name)
        if raw is None:
            return
        record = load_record(raw)
        record = {**record, "lease": record["lease"] - seconds}
        record["expires"] -= seconds
        left = record["expires"] - time.time()
        if left <= 0:
            store.raw.delete(name)
        else:
            store.raw.set(name, dump_record(record), left)
