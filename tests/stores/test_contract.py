"""One contract, every store: claim, replay, mismatch, release, fencing, leases, expiry.

DatabaseStore runs on the database of the run (SQLite or PostgreSQL), RedisStore
on a real Redis and on a private Redis Cluster (tier ``cluster``), CacheStore on the
default cache (LocMemCache or Redis).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from idempotency.stores.base import BaseStore, ClaimStatus, StoredResponse
from idempotency.stores.cache import CacheStore
from idempotency.stores.database import DatabaseStore
from idempotency.stores.redis import RedisStore
from tests.support import clocks
from tests.support.clusters import crossslot_errors

RESPONSE = StoredResponse(201, [("Content-Type", "application/json")], b'{"id": 1}\x00\xff')


@pytest.fixture(
    params=[
        pytest.param("database", id="database"),
        pytest.param("redis", id="redis", marks=pytest.mark.redis),
        # no ``redis`` mark: it needs no REDIS_URL, only redis-server to start the cluster
        pytest.param("redis-cluster", id="redis-cluster", marks=pytest.mark.cluster),
        pytest.param("cache", id="cache"),
    ]
)
def store(request: pytest.FixtureRequest, db: Any) -> Iterator[BaseStore]:
    if request.param == "database":
        yield DatabaseStore()
    elif request.param == "redis":
        yield RedisStore()
    elif request.param == "redis-cluster":
        cluster = request.getfixturevalue("on_cluster")
        yield RedisStore(cache="cluster")
        assert crossslot_errors(cluster) == []  # every script kept to the record's slot
    else:
        yield CacheStore()


@pytest.fixture
def key() -> str:
    return f"key-{uuid.uuid4()}"


def age(store: BaseStore, key: str, seconds: float) -> None:
    """Time passes for one record of ``user:1``, without a sleep (see ``tests.support.clocks``)."""
    clocks.age(store, "user:1", key, seconds)


def claim(
    store: BaseStore, key: str, fp: str = "fp1", *, lease: float = 30, ttl: float = 60
) -> Any:
    return store.claim(
        "user:1", key, fingerprint=fp, lease=lease, ttl=ttl, method="POST", route="/x/"
    )


def test_first_claim_owns_the_key(store: BaseStore, key: str) -> None:
    first = claim(store, key)
    assert first.status is ClaimStatus.CLAIMED
    assert first.fence > 0


def test_second_claim_sees_in_progress(store: BaseStore, key: str) -> None:
    claim(store, key)
    second = claim(store, key)
    assert second.status is ClaimStatus.IN_PROGRESS
    assert 0 < second.retry_after <= 30


def test_completed_record_replays_bytes(store: BaseStore, key: str) -> None:
    first = claim(store, key)
    assert store.complete(
        "user:1", key, fence=first.fence, response=RESPONSE, ttl=60, fingerprint="fp1"
    )
    again = claim(store, key)
    assert again.status is ClaimStatus.COMPLETED
    assert again.response == RESPONSE
    looked = store.lookup("user:1", key, fingerprint="fp1")
    assert looked is not None and looked.response == RESPONSE


def test_other_fingerprint_is_a_mismatch_in_any_state(store: BaseStore, key: str) -> None:
    first = claim(store, key)
    assert claim(store, key, "fp2").status is ClaimStatus.MISMATCH
    store.complete("user:1", key, fence=first.fence, response=RESPONSE, ttl=60, fingerprint="fp1")
    assert claim(store, key, "fp2").status is ClaimStatus.MISMATCH
    assert store.lookup("user:1", key, fingerprint="fp2").status is ClaimStatus.MISMATCH  # type: ignore[union-attr]


def test_scopes_do_not_share_keys(store: BaseStore, key: str) -> None:
    first = claim(store, key)
    store.complete("user:1", key, fence=first.fence, response=RESPONSE, ttl=60)
    other = store.claim("user:2", key, fingerprint="fp1", lease=30, ttl=60)
    assert other.status is ClaimStatus.CLAIMED


def test_release_frees_the_key(store: BaseStore, key: str) -> None:
    first = claim(store, key)
    assert store.release("user:1", key, fence=first.fence)
    assert store.lookup("user:1", key, fingerprint="fp1") is None
    assert claim(store, key).status is ClaimStatus.CLAIMED


def test_wrong_fence_cannot_complete_or_release(store: BaseStore, key: str) -> None:
    first = claim(store, key)
    assert not store.complete("user:1", key, fence=first.fence + 1, response=RESPONSE, ttl=60)
    assert not store.release("user:1", key, fence=first.fence + 1)
    assert claim(store, key).status is ClaimStatus.IN_PROGRESS


def test_expired_lease_is_taken_over_and_stale_owner_fenced_off(store: BaseStore, key: str) -> None:
    stale = claim(store, key, lease=30)
    age(store, key, 31)
    fresh = claim(store, key, lease=30)
    assert fresh.status is ClaimStatus.CLAIMED
    assert fresh.fence != stale.fence
    # the first owner wakes up late: neither its completion nor its release may land
    late = StoredResponse(500, [], b"stale")
    assert not store.complete("user:1", key, fence=stale.fence, response=late, ttl=60)
    assert not store.release("user:1", key, fence=stale.fence)
    assert store.complete("user:1", key, fence=fresh.fence, response=RESPONSE, ttl=60)
    assert claim(store, key).response == RESPONSE


def test_released_then_reclaimed_key_rejects_the_old_fence(store: BaseStore, key: str) -> None:
    first = claim(store, key)
    store.release("user:1", key, fence=first.fence)
    second = claim(store, key)
    assert not store.complete("user:1", key, fence=first.fence, response=RESPONSE, ttl=60)
    assert store.complete("user:1", key, fence=second.fence, response=RESPONSE, ttl=60)


def test_expired_record_is_absent_before_purge(store: BaseStore, key: str) -> None:
    first = claim(store, key, ttl=60)
    store.complete("user:1", key, fence=first.fence, response=RESPONSE, ttl=60)
    age(store, key, 50)
    assert store.lookup("user:1", key, fingerprint="fp1") is not None  # 10 s to go
    age(store, key, 11)
    assert store.lookup("user:1", key, fingerprint="fp1") is None
    # even another request's fingerprint may now use the key
    assert claim(store, key, "fp2").status is ClaimStatus.CLAIMED


def test_recovery_point_survives_release_and_is_handed_to_the_next_owner(
    store: BaseStore, key: str
) -> None:
    first = claim(store, key)
    assert store.save_recovery_point(
        "user:1", key, fence=first.fence, name="charged", data={"c": 7}
    )
    assert store.release("user:1", key, fence=first.fence)
    second = claim(store, key)
    assert second.status is ClaimStatus.CLAIMED
    assert (second.recovery_point, second.recovery_data) == ("charged", {"c": 7})
    assert not store.save_recovery_point("user:1", key, fence=first.fence, name="x")


def test_delete_removes_whoever_owns(store: BaseStore, key: str) -> None:
    claim(store, key)
    assert store.delete("user:1", key)
    assert store.lookup("user:1", key, fingerprint="fp1") is None


def test_database_atomic_insert_refuses_a_live_key(db: Any, key: str) -> None:
    store = DatabaseStore()
    with store.atomic():
        assert store.insert_completed("user:1", key, fingerprint="fp1", response=RESPONSE, ttl=60)
    with store.atomic():
        assert not store.insert_completed(
            "user:1", key, fingerprint="fp1", response=RESPONSE, ttl=60
        )
    assert store.lookup("user:1", key, fingerprint="fp1").response == RESPONSE  # type: ignore[union-attr]


def test_database_atomic_insert_replaces_an_expired_record(db: Any, key: str) -> None:
    store = DatabaseStore()
    with store.atomic():
        store.insert_completed("user:1", key, fingerprint="fp1", response=RESPONSE, ttl=60)
    age(store, key, 61)
    other = StoredResponse(200, [], b"new")
    with store.atomic():
        assert store.insert_completed("user:1", key, fingerprint="fp2", response=other, ttl=60)
    assert store.lookup("user:1", key, fingerprint="fp2").response == other  # type: ignore[union-attr]
