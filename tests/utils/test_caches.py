"""RawCache (``idempotency.utils.caches``): bytes in a Django cache, never unpickled. Which
backends it reads and how, and its counter; the pickles planted under a store's keys are
in tests/stores/test_cache.py."""

from __future__ import annotations

import uuid

import pytest
from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from django.core.exceptions import ImproperlyConfigured

from idempotency.utils.caches import RawCache, raw_kind
from tests.support.services import redis_url


def locmem() -> LocMemCache:
    return LocMemCache(str(uuid.uuid4()), {})


def test_each_backend_is_read_its_own_way_or_refused(tmp_path: object) -> None:
    assert raw_kind(locmem()) == raw_kind(DummyCache("d", {})) == "api"
    assert raw_kind(RedisCache("redis://127.0.0.1:1/0", {})) == "redis"
    assert raw_kind(FileBasedCache(str(tmp_path), {})) == ""


def test_django_redis_is_known_by_its_class_path() -> None:
    django_redis = pytest.importorskip("django_redis.cache")
    assert raw_kind(django_redis.RedisCache("redis://127.0.0.1:1/0", {})) == "django_redis"


def test_a_cache_that_unpickles_is_refused_on_first_use(tmp_path: object) -> None:
    raw = RawCache(FileBasedCache(str(tmp_path), {}), "files")
    with pytest.raises(ImproperlyConfigured, match="'files'.*idempotency.E020"):
        raw.get("k")


def test_in_process_it_is_the_cache_api() -> None:
    raw = RawCache(locmem())
    assert raw.add("k", b"1", 60) and not raw.add("k", b"2", 60)
    assert raw.get("k") == b"1"
    raw.set("k", b"3", 60)
    assert raw.get("k") == b"3"
    assert raw.delete("k") and raw.get("k") is None
    assert [raw.incr("n", 60) for _ in range(3)] == [1, 2, 3]


@pytest.mark.redis
def test_on_redis_bytes_go_in_and_out_as_they_are_and_redis_counts() -> None:
    cache = RedisCache(redis_url(), {})
    raw, name = RawCache(cache, "redis"), f"raw-{uuid.uuid4()}"
    assert raw.add(name, b"\x80\x04not a pickle", 60) and not raw.add(name, b"x", 60)
    assert raw.get(name) == b"\x80\x04not a pickle"
    with pytest.raises(ValueError, match="not a counter"):
        raw.incr(name, 60)
    assert raw.delete(name) and raw.get(name) is None
    assert [raw.incr(name, 60) for _ in range(2)] == [1, 2]
    client, key = raw._client(name, write=True)
    assert 0 < client.pttl(key) <= 60_000
    raw.delete(name)
