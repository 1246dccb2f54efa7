"""Pluggable parts configured by alias, as CACHES (idempotency.utils.backends): the store,
token and lock handlers (``stores["redis"]``, ``stores.all()``), one instance per alias
until the settings change, the constructor contract (``Backend(location=..., **OPTIONS)``),
a third party's backends, and what a bad entry gives at use."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from idempotency import consume_submit_token, issue_submit_token, lock
from idempotency.exceptions import LockNotAcquired, SubmitTokenInvalid, SubmitTokenUsed
from idempotency.locks import (
    Lock,
    MySQLLockBackend,
    PostgresLockBackend,
    RedisLockBackend,
    get_backend,
    lock_backends,
)
from idempotency.stores.base import get_store, stores
from idempotency.stores.cache import CacheStore
from idempotency.stores.database import DatabaseStore, database_store
from idempotency.stores.redis import RedisStore
from idempotency.tokens import (
    DatabaseTokens,
    RedisTokens,
    get_token_backend,
    token_backends,
)
from idempotency.tokens.base import hash_token
from idempotency.utils.backends import UnusableBackend
from tests.support.counting import unique
from tests.support.stores import (
    CACHE_STORE,
    DB_STORE,
    REDIS_STORE,
    entry,
    locks_using,
    tokens_using,
    using,
)
from tests.support.stores import (
    stores as stores_setting,
)
from tests.support.storms import Overlap, run_threads, succeeded
from tests.testapp.backends import CountingStore, MemoryTokens, ThreadLocks

MEMORY_TOKENS = "tests.testapp.backends.MemoryTokens"
THREAD_LOCKS = "tests.testapp.backends.ThreadLocks"

#: the issue's example
EXAMPLE = {
    "STORES": {
        "default": entry(DB_STORE, database="default"),
        "redis": entry(
            REDIS_STORE, "redis://127.0.0.1:6379/0", max_connections=50, wait_replicas=1
        ),
        "records": entry(CACHE_STORE, cache="default", key_prefix="rec"),
    }
}


# -- aliases -----------------------------------------------------------------------------


def test_each_alias_is_made_from_its_entry() -> None:
    with override_settings(IDEMPOTENCY=EXAMPLE):
        default, redis, records = stores["default"], stores["redis"], stores["records"]
    assert type(default) is DatabaseStore and default.using == "default"
    assert type(redis) is RedisStore
    assert redis.location == "redis://127.0.0.1:6379/0" and redis.cache is None
    assert redis.connector.options["max_connections"] == 50
    assert (redis.wait_replicas, redis.wait_timeout) == (1, 0.5)
    assert type(records) is CacheStore
    assert (records.alias, records.key_prefix) == ("default", "rec")


def test_all_and_the_default() -> None:
    with override_settings(IDEMPOTENCY=EXAMPLE):
        assert stores.all() == [stores["default"], stores["redis"], stores["records"]]
        assert get_store() is stores["default"] and get_store(None) is stores["default"]
        assert get_store("redis") is stores["redis"]
        assert "redis" in stores and "nope" not in stores


def test_the_default_setting_is_a_database_store() -> None:
    with override_settings(IDEMPOTENCY={}):
        store = get_store()
        assert type(store) is DatabaseStore and store.using == "default"
        assert store.response_cache is None and store.key_prefix == "idem"
        assert type(get_token_backend()) is DatabaseTokens
        assert type(get_backend()) is RedisLockBackend


def test_an_instance_is_taken_as_it_is() -> None:
    mine = CacheStore(cache="default")
    assert get_store(mine) is mine
    locks = ThreadLocks()
    assert get_backend(locks) is locks


@pytest.mark.parametrize("value", [CacheStore, "idempotency.stores.cache.CacheStore", 3])
def test_a_class_or_a_dotted_path_is_no_store(value: Any) -> None:
    """store= takes an alias or an instance: a dotted path is looked up as an alias."""
    with pytest.raises((ImproperlyConfigured, TypeError)) as raised:
        get_store(value)
    if isinstance(value, str):
        assert "has no store 'idempotency.stores.cache.CacheStore'" in str(raised.value)
    else:
        assert "an alias of IDEMPOTENCY['STORES'] or an instance of" in str(raised.value)


# -- one instance per alias, until the settings change --------------------------------------


def test_one_instance_per_alias_until_the_settings_change() -> None:
    with override_settings(IDEMPOTENCY=EXAMPLE):
        first = stores["redis"]
        assert stores["redis"] is first and get_store("redis") is first
    with override_settings(IDEMPOTENCY=EXAMPLE):
        assert stores["redis"] is not first  # override_settings made it anew


def test_a_changed_entry_takes_effect_under_override_settings() -> None:
    with override_settings(IDEMPOTENCY=using(CACHE_STORE, key_prefix="one")):
        assert get_store().key_prefix == "one"  # type: ignore[attr-defined]
        with override_settings(IDEMPOTENCY=using(CACHE_STORE, key_prefix="two")):
            assert get_store().key_prefix == "two"  # type: ignore[attr-defined]
        assert get_store().key_prefix == "one"  # type: ignore[attr-defined]


def test_one_instance_even_when_threads_ask_at_once() -> None:
    """Eight threads ask for an alias not made yet, released together by a barrier: one
    instance is made, and all eight get it (CountingStore lets a concurrent second
    construction through at once, so without the handler's lock this makes several)."""
    CountingStore.made.clear()
    CountingStore.second.clear()
    setting = {
        "STORES": {
            **stores_setting(DB_STORE),
            "counted": entry("tests.testapp.backends.CountingStore"),
        }
    }
    with override_settings(IDEMPOTENCY=setting):
        got = run_threads(8, lambda _index: stores["counted"])
    assert len(CountingStore.made) == 1
    assert all(store is CountingStore.made[0] for store in got)


def test_stores_tokens_and_locks_share_one_handler() -> None:
    assert type(stores) is type(token_backends) is type(lock_backends)
    assert (stores.setting, token_backends.setting, lock_backends.setting) == (
        "STORES",
        "TOKENS",
        "LOCKS",
    )


def test_database_store_finds_the_configured_one() -> None:
    setting = {
        "STORES": {
            **stores_setting(DB_STORE, response_cache="default"),
            "other": entry(DB_STORE, database="ledger"),
        }
    }
    with override_settings(IDEMPOTENCY=setting):
        assert database_store() is stores["default"]
        assert database_store("ledger") is stores["other"]
        plain = database_store("replica")  # none configured there: a plain one
        assert plain.using == "replica" and plain.response_cache is None
    with override_settings(IDEMPOTENCY=using(CACHE_STORE)):
        assert database_store().using == "default"


# -- the constructor contract ----------------------------------------------------------------

BACKENDS = [
    DatabaseStore,
    CacheStore,
    RedisStore,
    DatabaseTokens,
    RedisTokens,
    RedisLockBackend,
    PostgresLockBackend,
    MySQLLockBackend,
]


@pytest.mark.parametrize("cls", BACKENDS, ids=lambda cls: cls.__name__)
def test_each_backend_declares_its_constructors_keywords(cls: type) -> None:
    """Each declared option is a keyword-only argument with the declared default, and
    each keyword argument is declared (``location`` where the backend takes one). A
    constructor that passes ``**keywords`` on to its base's (RedisStore to RedisBackend)
    takes the base's keywords too."""
    parameters: dict[str, inspect.Parameter] = {}
    for owner in cls.__mro__:
        if "__init__" not in vars(owner):
            continue
        passed_on = False
        for name, parameter in inspect.signature(owner.__init__).parameters.items():
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                passed_on = True
            elif name != "self":
                parameters.setdefault(name, parameter)
        if not passed_on:
            break
    location = parameters.pop("location", None)
    assert (location is not None) == bool(cls.location_schemes)  # type: ignore[attr-defined]
    assert location is None or location.default is None
    assert set(parameters) == set(cls.options)  # type: ignore[attr-defined]
    for name, parameter in parameters.items():
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert parameter.default == cls.options[name].default, name  # type: ignore[attr-defined]


def test_location_is_passed_only_when_given() -> None:
    with override_settings(IDEMPOTENCY=tokens_using("redis", cache="other")):
        made = get_token_backend()
    assert type(made) is RedisTokens and made.location is None and made.cache == "other"
    with override_settings(IDEMPOTENCY=locks_using("redis", location="unix:///tmp/r.sock")):
        made = get_backend()
    assert type(made) is RedisLockBackend and made.location == "unix:///tmp/r.sock"


# -- a third party's backends ----------------------------------------------------------------


def test_a_third_party_token_backend_keeps_the_tokens() -> None:
    with override_settings(IDEMPOTENCY=tokens_using(MEMORY_TOKENS)):
        backend = get_token_backend()
        assert type(backend) is MemoryTokens
        token = issue_submit_token(user_or_scope="tenant:1", purpose="form")
        assert list(backend.tokens) == [hash_token(token)]
        with pytest.raises(SubmitTokenInvalid):
            consume_submit_token(token=token, user_or_scope="tenant:2", purpose="form")
        consume_submit_token(token=token, user_or_scope="tenant:1", purpose="form")
        with pytest.raises(SubmitTokenUsed):
            consume_submit_token(token=token, user_or_scope="tenant:1", purpose="form")
        assert backend.tokens[hash_token(token)][3] is True


def test_a_third_party_lock_backend_takes_the_locks() -> None:
    setting = {"LOCKS": {"default": entry(THREAD_LOCKS), "other": entry(THREAD_LOCKS)}}
    with override_settings(IDEMPOTENCY=setting):
        backend = get_backend()
        assert type(backend) is ThreadLocks and lock_backends["other"] is not backend
        with lock("ledger", timeout=5):
            assert backend.taken == ["ledger"]
            with pytest.raises(LockNotAcquired), lock("ledger", wait=0):
                pass
            with lock("ledger", wait=0, backend="other"):  # another alias, another backend
                assert lock_backends["other"].taken == ["ledger"]  # type: ignore[attr-defined]


# -- bad entries: ImproperlyConfigured at use, with the checks' words --------------------------

BAD = [
    pytest.param(using("zookeeper"), "E044", "cannot be imported", id="not-a-path"),
    pytest.param(using("collections.OrderedDict"), "E045", "is not a subclass of", id="base"),
    pytest.param({"STORES": {"default": "x"}}, "E061", "it must be a dict", id="shape"),
    pytest.param(using(DB_STORE, location="redis://x"), "E062", "takes no LOCATION", id="loc"),
    pytest.param(using(REDIS_STORE, location="http://x"), "E062", "redis://", id="scheme"),
    pytest.param(using(DB_STORE, using="x"), "E063", "does not accept", id="option"),
    pytest.param(using(REDIS_STORE, wait_replicas=-1), "E064", "integer >= 0", id="value"),
    pytest.param(
        {"STORES": {"main": entry(DB_STORE)}}, "E060", "has no store 'default'", id="no-default"
    ),
]


@pytest.mark.parametrize(("setting", "code", "words"), BAD)
def test_a_bad_entry_raises_improperly_configured_at_use(
    setting: dict[str, Any], code: str, words: str
) -> None:
    with override_settings(IDEMPOTENCY=setting), pytest.raises(UnusableBackend) as raised:
        get_store()
    assert isinstance(raised.value, ImproperlyConfigured)
    assert raised.value.code == code and words in str(raised.value)
    assert "IDEMPOTENCY['STORES']" in str(raised.value)


def test_an_unknown_alias_names_the_configured_ones() -> None:
    with override_settings(IDEMPOTENCY=EXAMPLE), pytest.raises(ImproperlyConfigured) as raised:
        get_store("radis")
    text = str(raised.value)
    assert "IDEMPOTENCY['STORES'] has no store 'radis'" in text
    assert "'default', 'redis', 'records'" in text


def test_a_bad_lock_or_token_entry_raises_at_use() -> None:
    with (
        override_settings(IDEMPOTENCY=locks_using("idempotency.locks.base.LockBackend")),
        pytest.raises(ImproperlyConfigured, match="does not implement holding"),
    ):
        lock("x").acquire()
    with (
        override_settings(IDEMPOTENCY=tokens_using("tests.testapp.backends.HalfTokens")),
        pytest.raises(ImproperlyConfigured, match="does not implement consume"),
    ):
        issue_submit_token(user_or_scope="tenant:1", purpose="form")
    with pytest.raises(ImproperlyConfigured, match="IDEMPOTENCY\\['LOCKS'\\] has no"):
        lock("x", backend="nope").acquire()


# -- the built-in backends by dotted path, on real servers -----------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "path",
    [
        pytest.param("idempotency.locks.redis.RedisLockBackend", marks=pytest.mark.redis),
        pytest.param("idempotency.locks.database.PostgresLockBackend", marks=pytest.mark.postgres),
        pytest.param("idempotency.locks.database.MySQLLockBackend", marks=pytest.mark.mysql),
    ],
)
def test_built_in_lock_backends_by_dotted_path(path: str) -> None:
    name = unique("dotted")

    def race(count: int) -> list[bool]:
        tried = Overlap(count)

        def try_lock(_index: int) -> bool:
            attempt = Lock(name, timeout=30)
            taken = attempt.acquire(wait=0)
            tried.enter()
            if taken:
                tried.hold()  # held while the others try
                attempt.release()
            return taken

        return succeeded(run_threads(count, try_lock))

    with override_settings(IDEMPOTENCY=locks_using(path)):
        with lock(name, timeout=30) as held:
            assert held.owned()
            assert race(6) == [False] * 6
        assert race(6).count(True) == 1


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(
            "idempotency.tokens.database.DatabaseTokens",
            marks=[pytest.mark.server_db, pytest.mark.django_db(transaction=True)],
        ),
        pytest.param(
            "idempotency.tokens.redis.RedisTokens", marks=[pytest.mark.redis, pytest.mark.django_db]
        ),
    ],
)
def test_built_in_token_backends_by_dotted_path(path: str) -> None:
    with override_settings(IDEMPOTENCY=tokens_using(path)):
        token = issue_submit_token(user_or_scope="tenant:dotted", purpose="form")

        def consume(_index: int) -> str:
            consume_submit_token(token=token, user_or_scope="tenant:dotted", purpose="form")
            return "ok"

        results = run_threads(10, consume)
    assert results.count("ok") == 1, results
    assert sum(isinstance(r, SubmitTokenUsed) for r in results) == 9, results
