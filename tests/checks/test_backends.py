"""The aliases of STORES, TOKENS and LOCKS (idempotency.checks.backends): E004, E044,
E045, E046, E060, E061, E062, E063, E064; and a view naming an unknown store (E013)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from tests.support.checks import REDIS, check_messages, ids, only
from tests.support.stores import (
    CACHE_STORE,
    DB_STORE,
    REDIS_STORE,
    entry,
    locks_using,
    stores,
    tokens_using,
    using,
)


@pytest.mark.parametrize(
    "setting",
    [
        {"STORES": [entry(DB_STORE)]},
        {"STORES": {1: entry(DB_STORE)}},
        {"TOKENS": "database"},
        {"LOCKS": None},
    ],
    ids=["stores-list", "stores-int-alias", "tokens-str", "locks-none"],
)
def test_e004_a_setting_of_aliases_that_is_no_dict(setting: dict[str, Any]) -> None:
    only("E004", IDEMPOTENCY=setting)


@pytest.mark.parametrize(
    ("setting", "code"),
    [
        (using("idempotency.stores.NoSuchStore"), "E044"),
        (using("no_such_module.Store"), "E044"),
        ({"STORES": {"default": {"BACKEND": 1}}}, "E044"),
        (using("collections.OrderedDict"), "E045"),
        (using("idempotency.tokens.DatabaseTokens"), "E045"),
        (locks_using("zookeeper"), "E044"),
        (tokens_using("tokens.Missing"), "E044"),
        (locks_using("idempotency.tokens.database.DatabaseTokens"), "E045"),
        (locks_using("idempotency.locks.base.DatabaseLockBackend"), "E046"),
    ],
)
def test_e044_e045_e046_backends(setting: dict[str, Any], code: str) -> None:
    """A BACKEND that cannot be imported (E044), is no subclass of its base class (E045)
    or leaves abstract methods unimplemented (E046)."""
    only(code, IDEMPOTENCY=setting)


def test_e044_names_the_alias_and_the_base() -> None:
    (message,) = check_messages(IDEMPOTENCY={"STORES": {"default": entry("no.Such")}})
    assert message.msg.startswith("IDEMPOTENCY['STORES']['default']['BACKEND'] = 'no.Such'")
    assert "idempotency.stores.base.BaseStore" in message.hint


@pytest.mark.parametrize("setting", ["STORES", "TOKENS", "LOCKS"])
def test_e060_no_default_alias(setting: str) -> None:
    backend = {
        "STORES": DB_STORE,
        "TOKENS": "idempotency.tokens.DatabaseTokens",
        "LOCKS": "idempotency.locks.PostgresLockBackend",
    }[setting]
    (message,) = check_messages(IDEMPOTENCY={setting: {"main": entry(backend)}})
    assert message.id == "idempotency.E060"
    assert f"IDEMPOTENCY[{setting!r}] has no" in message.msg and "'main'" in message.hint


@pytest.mark.parametrize(
    "value",
    [
        "idempotency.stores.DatabaseStore",
        {"BACKEND": DB_STORE, "OPTION": {}},
        {"BACKEND": DB_STORE, "OPTIONS": ["database"]},
    ],
    ids=["a-path", "unknown-key", "options-list"],
)
def test_e061_an_entry_not_shaped_as_in_caches(value: Any) -> None:
    (message,) = check_messages(IDEMPOTENCY={"STORES": {"default": value}})
    assert message.id == "idempotency.E061"
    assert message.msg.startswith("IDEMPOTENCY['STORES']['default']")


def test_e061_names_the_unknown_keys() -> None:
    setting = {"STORES": {"default": {"BACKEND": DB_STORE, "OPTION": {}}}}
    (message,) = check_messages(IDEMPOTENCY=setting)
    assert "(unknown keys: OPTION)" in message.msg


@pytest.mark.parametrize(
    "location",
    ["http://127.0.0.1:6379/0", "127.0.0.1:6379", "", 6379],
)
def test_e062_a_redis_location_that_is_no_redis_url(location: Any) -> None:
    (message,) = check_messages(IDEMPOTENCY=using(REDIS_STORE, location=location))
    assert message.id == "idempotency.E062"
    assert "redis://" in message.msg and "rediss://" in message.msg and "unix://" in message.msg


@pytest.mark.parametrize(
    "location",
    ["redis://127.0.0.1:6379/0", "rediss://cache.example:6380/1", "unix:///tmp/redis.sock"],
)
def test_e062_accepts_redis_unix_and_tls_urls(location: str) -> None:
    assert ids(IDEMPOTENCY=using(REDIS_STORE, location=location)) == []
    assert ids(IDEMPOTENCY=tokens_using("redis", location=location)) == []
    assert ids(IDEMPOTENCY=locks_using("redis", location=location)) == []


def test_e062_a_location_for_a_backend_that_takes_none() -> None:
    (message,) = check_messages(IDEMPOTENCY=using(DB_STORE, location="redis://x/0"))
    assert message.id == "idempotency.E062"
    assert "takes no LOCATION" in message.msg


@pytest.mark.parametrize(
    ("setting", "name"),
    [
        (using(DB_STORE, using="default"), "using"),
        (using(CACHE_STORE, alias="default"), "alias"),
        (using(REDIS_STORE, wait_replica=1), "wait_replica"),
        (tokens_using("database", key_prefix="x"), "key_prefix"),
        (locks_using("postgres", cache="default"), "cache"),
    ],
)
def test_e063_an_option_the_backend_does_not_accept(setting: dict[str, Any], name: str) -> None:
    (message,) = check_messages(IDEMPOTENCY=setting, CACHES=REDIS)
    assert message.id == "idempotency.E063"
    assert repr(name) in message.msg and "accepts:" in message.hint


def test_e063_suggests_the_closest_option() -> None:
    (message,) = check_messages(IDEMPOTENCY=using(REDIS_STORE, wait_replica=1), CACHES=REDIS)
    assert "Did you mean 'wait_replicas'?" in message.hint


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (using(REDIS_STORE, wait_replicas=-1), "an integer >= 0"),
        (using(REDIS_STORE, wait_replicas=True), "an integer >= 0"),
        (using(REDIS_STORE, wait_timeout=0), "a number > 0"),
        (using(REDIS_STORE, max_connections="50"), "None or an integer > 0"),
        (using(DB_STORE, database=None), "a string"),
        (using(CACHE_STORE, key_prefix=3), "a string"),
    ],
)
def test_e064_an_option_value_the_backend_does_not_accept(
    setting: dict[str, Any], expected: str
) -> None:
    (message,) = check_messages(IDEMPOTENCY=setting, CACHES=REDIS)
    assert message.id == "idempotency.E064"
    assert expected in message.msg and message.msg.startswith("IDEMPOTENCY['STORES']")


def test_the_documented_example_passes() -> None:
    """The issue's example: a database store and a Redis store at a URL."""
    setting = {
        "STORES": {
            **stores(DB_STORE, database="default"),
            "redis": entry(
                REDIS_STORE,
                "redis://127.0.0.1:6379/0",
                max_connections=50,
                wait_replicas=1,
            ),
        }
    }
    assert ids(IDEMPOTENCY=setting) == []


def test_check_command_reports_an_unusable_alias() -> None:
    with (
        override_settings(IDEMPOTENCY=using(REDIS_STORE, location="http://x")),
        pytest.raises(SystemCheckError, match=r"idempotency\.E062"),
    ):
        call_command("check", databases=[])
