"""Records in Django caches are never unpickled (issue 36, finding 2), nor are the record
cap's counters (issue 43, finding 2), and the response cache's keys name the database
(issue 36, finding 3).

Django's cache API unpickles what it reads (django-redis by default, Django's own
RedisCache): a pickle written under a record's key ran when its owner replayed. These
tests write a real pickle, whose loading would create a file, under the exact key the
library reads, through the raw Redis connection an attacker on the network would use.
"""

from __future__ import annotations

import json
import os
import pickle
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import caches
from django.test import Client, override_settings

from idempotency.exceptions import StoreCorrupted
from idempotency.stores.base import ClaimStatus, StoredResponse, quota_window
from idempotency.stores.cache import CacheStore
from idempotency.stores.database import DatabaseStore
from idempotency.stores.records import record_digest
from idempotency.utils.backends import KEY_PREFIX
from idempotency.utils.caches import RawCache, raw_kind
from tests.support.counting import unique
from tests.support.stores import CACHE_STORE, using
from tests.testapp.executions import executions

pytestmark = [pytest.mark.redis, pytest.mark.django_db(databases=["default", "ledger"])]


class Payload:
    """A pickle that creates ``path`` when it is loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (f"touch {self.path}",))


def _caches() -> dict[str, Any]:
    """The django-redis ``default`` and Django's own RedisCache on the same Redis."""
    location = settings.CACHES["default"]["LOCATION"]
    return {
        **settings.CACHES,
        "builtin": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": location},
    }


def _write_raw(alias: str, key: str, value: bytes) -> None:
    """Write ``value`` under ``key`` as the cache names it, bypassing its serializer."""
    cache = caches[alias]
    if raw_kind(cache) == "django_redis":
        cache.client.get_client(write=True).set(cache.client.make_key(key), value)  # type: ignore[attr-defined]
    else:
        name = cache.make_and_validate_key(key)
        cache._cache.get_client(name, write=True).set(name, value)  # type: ignore[attr-defined]


def test_the_payload_really_runs_when_unpickled(tmp_path: Path) -> None:
    """The attack is real: Django's cache API on the same bytes runs it."""
    marker = tmp_path / "ran"
    with override_settings(CACHES=_caches()):
        _write_raw("builtin", "probe", pickle.dumps(Payload(marker)))
        caches["builtin"].get("probe")
    assert marker.exists()


@pytest.mark.parametrize("alias", ["default", "builtin"])
def test_a_pickle_under_a_cache_store_record_is_never_loaded(alias: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with override_settings(CACHES=_caches()):
        store = CacheStore(cache=alias)
        scope, key = "user:1", unique("key")
        _write_raw(alias, store.record_key(scope, key), pickle.dumps(Payload(marker)))
        for operation in (
            lambda: store.lookup(scope, key, fingerprint="f"),
            lambda: store.claim(scope, key, fingerprint="f", lease=5, ttl=60),
        ):
            with pytest.raises(StoreCorrupted):
                operation()
        # and the store still works as a store on that cache
        other = unique("key")
        claim = store.claim(scope, other, fingerprint="f", lease=5, ttl=60)
        response = StoredResponse(201, [("Content-Type", "application/json")], b'{"id": 1}')
        assert store.complete(scope, other, fence=claim.fence, response=response, ttl=60)
        replay = store.claim(scope, other, fingerprint="f", lease=5, ttl=60)
        assert replay.status is ClaimStatus.COMPLETED and replay.response == response
    assert not marker.exists()


@pytest.mark.parametrize("alias", ["default", "builtin"])
def test_a_pickle_under_a_response_cache_key_is_never_loaded(alias: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    response = StoredResponse(201, [("Content-Type", "application/json")], b'{"iban": "x"}')
    with override_settings(CACHES=_caches()):
        store = DatabaseStore(response_cache=alias)
        scope, key = "user:1", unique("key")
        claim = store.claim(scope, key, fingerprint="f", lease=5, ttl=60)
        assert store.complete(scope, key, fence=claim.fence, response=response, ttl=60)
        assert store.response_cache is not None
        cache_key = store.response_cache.key(scope, key)
        _write_raw(alias, cache_key, pickle.dumps(Payload(marker)))
        # the database answers instead (the cache is never the source of truth)
        seen = store.lookup(scope, key, fingerprint="f")
        assert seen is not None and seen.status is ClaimStatus.COMPLETED
        assert seen.response == response
        # ... and its own bytes replace the foreign value: the next replay reads them
        assert RawCache(caches[alias]).get(cache_key) != pickle.dumps(Payload(marker))
        again = store.lookup(scope, key, fingerprint="f")
        assert again is not None and again.response == response
    assert not marker.exists()


def _counter_key(scope: str, window: float, *, later: float = 0) -> str:
    """The name CacheStore gives the record cap's counter of ``scope`` in the window of
    ``later`` seconds from now."""
    start, _left = quota_window(window, time.time() + later)
    return f"{KEY_PREFIX.default}:quota:{record_digest(scope, '')}:{start}"


@pytest.mark.parametrize("alias", ["default", "builtin"])
def test_a_pickle_under_a_record_cap_counter_is_never_loaded(alias: str, tmp_path: Path) -> None:
    """Issue 43, finding 2: the cap counted with the cache API's ``incr``, which on
    django-redis reads a value that is not an integer through its serializer (the pickle
    ran) and on Django's RedisCache raised redis-py's ResponseError (a 500). Now Redis
    counts (INCR): the foreign value is a corrupt record, never loaded."""
    marker = tmp_path / "ran"
    scope = unique("merchant")
    with override_settings(CACHES=_caches()):
        store = CacheStore(cache=alias)
        _write_raw(alias, _counter_key(scope, 60), pickle.dumps(Payload(marker)))
        with pytest.raises(StoreCorrupted):
            store.count_new_record(scope, window=60)
        # an integer planted there is counted on by Redis, as a counter of ours is
        other = unique("merchant")
        _write_raw(alias, _counter_key(other, 60), b"41")
        assert store.count_new_record(other, window=60)[0] == 42
        # and a new counter starts at 1, expiring with its window
        fresh = unique("merchant")
        assert [store.count_new_record(fresh, window=60)[0] for _ in range(3)] == [1, 2, 3]
        ttl = RawCache(caches[alias])._client(_counter_key(fresh, 60), write=False)
        assert 0 < ttl[0].pttl(ttl[1]) <= 61_000
    assert not marker.exists()


@pytest.mark.parametrize("alias", ["default", "builtin"])
def test_a_planted_counter_pickle_answers_a_problem_and_runs_nothing(
    alias: str, tmp_path: Path, client_a: Client, user: Any, wallet: Any, execution_log: Path
) -> None:
    """The attack end to end: the next ordinary request of the victim with the cap on."""
    marker = tmp_path / "ran"
    idempotency = {
        **using(CACHE_STORE, cache=alias),
        "MODE": "lease",
        "MAX_NEW_RECORDS": 5,
        "RECORD_WINDOW": 60,
    }
    with override_settings(CACHES=_caches(), IDEMPOTENCY=idempotency):
        from idempotency.scopes import principal_scope

        scope = principal_scope(user)
        assert scope is not None
        for later in (0, 60):  # this window and, should the request cross, the next
            _write_raw(alias, _counter_key(scope, 60, later=later), pickle.dumps(Payload(marker)))
        key = unique("key")
        answer = client_a.post(
            "/t/outcome/", data=json.dumps({"amount": 1}), content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=key,
        )  # fmt: skip
    assert answer.status_code == 500
    assert answer["Content-Type"] == "application/problem+json"
    assert json.loads(answer.content)["code"] == "idempotency-record-unreadable"
    assert executions(execution_log)[key] == 0
    assert not marker.exists()


def test_two_databases_sharing_one_response_cache_never_answer_each_others_records() -> None:
    """Finding 3: the response cache's key names the database alias."""
    scope, key = "user:1", unique("key")
    stores = {
        alias: DatabaseStore(database=alias, response_cache="default")
        for alias in ("default", "ledger")
    }
    keys = {alias: store.response_cache.key(scope, key) for alias, store in stores.items()}  # type: ignore[union-attr]
    assert keys["default"] != keys["ledger"]
    bodies = {"default": b'{"db": "default"}', "ledger": b'{"db": "ledger"}'}
    for alias, store in stores.items():
        claim = store.claim(scope, key, fingerprint="f", lease=5, ttl=60)
        assert store.complete(
            scope, key, fence=claim.fence, response=StoredResponse(201, [], bodies[alias]), ttl=60
        )
    for _ in range(2):  # the first replay fills the cache, the second reads it
        for alias, store in stores.items():
            seen = store.lookup(scope, key, fingerprint="f")
            assert seen is not None and seen.response is not None
            assert seen.response.body == bodies[alias]
