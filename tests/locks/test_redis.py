"""``idempotency/locks/redis.py``: a lock is a Redis key under one hash tag holding a
random owner token, set with ``NX`` and the lock's timeout; only that token releases or
extends it. On the Redis of ``REDIS_URL`` (the cache ``"default"``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from idempotency import lock
from idempotency.locks import RedisLockBackend
from tests.support.counting import unique

pytestmark = pytest.mark.redis


@pytest.fixture
def redis_locks() -> RedisLockBackend:
    return RedisLockBackend(key_prefix="beyond-locks")


@pytest.fixture
def name(redis_locks: RedisLockBackend, redis_client: Any) -> Iterator[str]:
    name = unique("redis-lock")
    yield name
    redis_client.delete(redis_locks.key(name))


def test_the_key_is_prefixed_and_hash_tagged_and_hides_the_name(
    redis_locks: RedisLockBackend,
) -> None:
    key = redis_locks.key("orders/42")
    assert key.startswith("beyond-locks:lock:{") and key.endswith("}")
    assert key.count("{") == 1 and "orders" not in key
    assert redis_locks.key("orders/42") == key != redis_locks.key("orders/43")
    assert RedisLockBackend(key_prefix="other").key("orders/42") != key


def test_the_owner_token_takes_the_key_with_the_timeout(
    redis_locks: RedisLockBackend, name: str, redis_client: Any
) -> None:
    first = redis_locks.holding(name, 5.0)
    assert first.try_acquire() and first.owned()
    key = redis_locks.key(name)
    assert 4000 < redis_client.pttl(key) <= 5000
    second = redis_locks.holding(name, 5.0)
    assert not second.try_acquire() and not second.owned()
    assert redis_client.get(key) != b"" and first.release() and not first.owned()
    assert redis_client.exists(key) == 0
    forever = redis_locks.holding(name, None)
    assert forever.try_acquire()
    assert redis_client.pttl(key) == -1  # no timeout: only a release frees it
    assert forever.release()


@pytest.fixture
def taken(redis_locks: RedisLockBackend, name: str) -> Any:
    """The lock ``name`` taken for 5 s."""
    holding = redis_locks.holding(name, 5.0)
    assert holding.try_acquire()
    return holding


def test_only_the_owner_token_releases_or_extends(taken: Any, redis_client: Any) -> None:
    held, key = taken, taken.key
    redis_client.set(key, b"someone-else", px=5000)  # it expired and was taken
    assert held.owned() is False
    assert held.extend(10.0) is False and redis_client.pttl(key) <= 5000
    assert held.release() is False
    assert redis_client.get(key) == b"someone-else"


def test_extend_adds_to_the_remaining_time_or_replaces_it(taken: Any, redis_client: Any) -> None:
    held, key = taken, taken.key
    assert held.extend(10.0)
    assert 14000 < redis_client.pttl(key) <= 15000
    assert held.extend(1.0, replace_ttl=True)
    assert 0 < redis_client.pttl(key) <= 1000
    redis_client.persist(key)  # a key without a TTL gets one
    assert held.extend(3.0)
    assert 2000 < redis_client.pttl(key) <= 3000
    assert held.release()


# -- through lock() (moved from tests/locks/test_locks.py) --------------------------------


def test_redis_lock_key_and_owner_token() -> None:
    from idempotency.utils.redis_clients import RedisConnector

    name = unique("keyed")
    client = RedisConnector(cache="default").client
    with lock(name, timeout=5, backend=RedisLockBackend()) as held:
        key = RedisLockBackend().key(name)
        assert key.count("{") == 1 and key.endswith("}")  # a hash tag
        assert 0 < client.pttl(key) <= 5000
        token = client.get(key)
        client.set(key, b"someone-else")  # as if it expired and was taken
        assert held.release() is False
        assert client.get(key) == b"someone-else"
        assert token != b"someone-else"
    client.delete(key)
    with lock(name, timeout=None, backend=RedisLockBackend()):
        assert client.pttl(RedisLockBackend().key(name)) == -1
