"""The stores in use and their caches and modes (idempotency.checks.stores): E006, E008,
E012, E013, E020, E050, W001, W003, W004."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from tests.support.checks import DUMMY, LOCMEM, REDIS, ids, one_database, only
from tests.support.stores import CACHE_STORE, DB_STORE, REDIS_STORE, entry, stores, using


@pytest.mark.parametrize("store", [CACHE_STORE, REDIS_STORE])
def test_e006_atomic_mode_with_a_store_that_cannot(store: str) -> None:
    assert "idempotency.E006" in ids(IDEMPOTENCY={"MODE": "atomic", **using(store)}, CACHES=REDIS)
    assert "idempotency.E006" not in ids(IDEMPOTENCY={"MODE": "atomic"})


def test_e008_cache_alias_not_in_caches() -> None:
    only("E008", IDEMPOTENCY=using(DB_STORE, response_cache="responses"), CACHES=REDIS)
    only("E008", IDEMPOTENCY=using(CACHE_STORE, cache="records"), CACHES=REDIS)


def test_e012_cache_store_on_dummy_cache() -> None:
    only("E012", IDEMPOTENCY={**using(CACHE_STORE)}, CACHES=DUMMY)


FILE_CACHE = {
    "default": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": "/tmp/idempotency-e020",
    }
}


BUILTIN_REDIS = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:6379/15",
    }
}


def test_e020_records_in_a_cache_that_unpickles() -> None:
    """Issue 36, finding 2: a cache read only through pickle is refused for records."""
    only("E020", IDEMPOTENCY={**using(CACHE_STORE)}, CACHES=FILE_CACHE)
    only("E020", IDEMPOTENCY=using(DB_STORE, response_cache="default"), CACHES=FILE_CACHE)
    # the caches read raw (Redis) or in-process are fine
    assert ids(IDEMPOTENCY={**using(CACHE_STORE)}, CACHES=REDIS) == []
    assert ids(IDEMPOTENCY=using(DB_STORE, response_cache="default"), CACHES=BUILTIN_REDIS) == []


SHARDED = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": ["redis://127.0.0.1:6379/15", "redis://127.0.0.1:6379/14"],
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.ShardClient"},
    }
}


def test_e050_records_in_a_django_redis_cache_with_no_single_connection() -> None:
    """Issue 43, finding 2: django-redis' ShardClient hands out no Redis connection, so
    records and record-cap counters there could only go through its unpickling API."""
    only("E050", IDEMPOTENCY=using(CACHE_STORE), CACHES=SHARDED)
    only("E050", IDEMPOTENCY=using(DB_STORE, response_cache="default"), CACHES=SHARDED)
    with (
        override_settings(IDEMPOTENCY=using(CACHE_STORE), CACHES=SHARDED),
        pytest.raises(SystemCheckError, match=r"idempotency\.E050"),
    ):
        call_command("check", databases=[])
    default_client = {
        "default": {
            **REDIS["default"],
            "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
        }
    }
    assert ids(IDEMPOTENCY=using(CACHE_STORE), CACHES=default_client) == []


def test_w003_response_cache_on_locmem() -> None:
    only("W003", IDEMPOTENCY=using(DB_STORE, response_cache="default"), CACHES=LOCMEM)
    assert ids(IDEMPOTENCY=using(DB_STORE, response_cache="default"), CACHES=REDIS) == []


def test_every_alias_is_checked() -> None:
    """Not only "default": each alias of STORES is a store in use."""
    setting = {"STORES": {**stores(DB_STORE), "records": entry(CACHE_STORE)}}
    only("E012", IDEMPOTENCY=setting, CACHES=DUMMY)


def test_w001_cache_store_on_locmem() -> None:
    only("W001", IDEMPOTENCY={**using(CACHE_STORE)}, CACHES=LOCMEM)
    assert ids(IDEMPOTENCY={**using(CACHE_STORE)}, CACHES=REDIS) == []


@pytest.fixture
def atomic_requests() -> dict[str, Any]:
    """DATABASES as configured, with ATOMIC_REQUESTS on for the default database."""
    return {
        alias: {**config, "ATOMIC_REQUESTS": alias == "default"}
        for alias, config in one_database().items()
    }


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_w004_atomic_requests_with_lease_mode(atomic_requests: dict[str, Any]) -> None:
    only("W004", IDEMPOTENCY={"MODE": "lease"}, DATABASES=atomic_requests)
    # atomic mode, or a lease kept outside the database, is fine
    assert ids(IDEMPOTENCY={"MODE": "auto"}, DATABASES=atomic_requests) == []
    assert (
        ids(
            IDEMPOTENCY={"MODE": "lease", **using(REDIS_STORE)},
            DATABASES=atomic_requests,
            CACHES=REDIS,
        )
        == []
    )
