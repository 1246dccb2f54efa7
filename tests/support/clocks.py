"""Time passing for a store's record, and the clock of the record quota's windows, without a
sleep."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db.models import F

from idempotency.models import SubmitToken
from idempotency.stores.base import BaseStore
from idempotency.stores.cache import CacheStore, dump_record, load_record
from idempotency.stores.database import DatabaseStore
from idempotency.stores.records import quota_window
from idempotency.stores.redis import RedisStore
from idempotency.tokens import DatabaseTokens, RedisTokens
from idempotency.tokens.base import TokenBackend, hash_token


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
        if store.client.pttl(name) < 0:
            return
        lease = store.client.hget(name, "lease")
        if lease:  # a completed record's is empty
            store.client.hset(name, "lease", str(int(lease) - ms))
        shorten_ttl(store.client, name, ms)
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


def age_token(backend: TokenBackend, token: str, seconds: float) -> None:
    """Move one submit token's lifetime ``seconds`` into the past, on the clock its backend
    judges it by: the row's timestamps (its consumption too), or the Redis TTLs of the token
    and its tombstone (a key whose TTL that outlasts is gone, as Redis would drop it)."""
    token_hash = hash_token(token)
    if isinstance(backend, DatabaseTokens):
        delta = timedelta(seconds=seconds)
        SubmitToken.objects.using(backend.using).filter(token_hash=token_hash).update(
            created_at=F("created_at") - delta,
            expires_at=F("expires_at") - delta,
            consumed_at=F("consumed_at") - delta,  # NULL (not consumed) stays NULL
        )
        return
    assert isinstance(backend, RedisTokens)
    for name in backend.keys(token_hash):
        shorten_ttl(backend.client, name, int(seconds * 1000))


def shorten_ttl(client: Any, name: str, ms: int) -> None:
    """Take ``ms`` off the Redis key ``name``'s TTL; a key it outlasts is deleted, as Redis
    would drop it. No such key (or one without a TTL, which none of the library's has):
    nothing."""
    left = client.pttl(name)
    if left < 0:
        return
    if left <= ms:
        client.delete(name)
    else:
        client.pexpire(name, left - ms)


class QuotaClock:
    """The clock ``MAX_NEW_RECORDS``' fixed windows are read by, standing at the start of
    the window a test begins in: every request of the test counts in that one window
    (windows are epoch multiples, so on the wall clock a test begun near a window's end
    straddles two, and a cap of 3 let a 4th request through), with the whole window left
    to live. :meth:`advance` moves it on."""

    def __init__(self, window: float) -> None:
        self.now = time.time() // window * window

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def window(self, window: float, now: float) -> tuple[int, float]:
        """:func:`~idempotency.stores.records.quota_window`, read on this clock."""
        return quota_window(window, self.now)


@contextmanager
def quota_clock(window: float) -> Iterator[QuotaClock]:
    """Every loaded store module's ``quota_window`` reads a :class:`QuotaClock`."""
    clock = QuotaClock(window)
    readers = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("idempotency.") and getattr(module, "quota_window", None) is quota_window
    ]
    assert readers, "no store module reads quota_window"
    try:
        for module in readers:
            module.quota_window = clock.window  # type: ignore[attr-defined]  # the one seam
        yield clock
    finally:
        for module in readers:
            module.quota_window = quota_window  # type: ignore[attr-defined]  # put back
