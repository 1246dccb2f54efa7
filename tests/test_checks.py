"""The system checks (idempotency.checks) and their messages: one entry per id, each with a
hint and raised somewhere in the package; silence for the defaults, each id with
override_settings, and call_command("check") reporting them."""

from __future__ import annotations

import importlib.util
import re
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.http import HttpRequest, HttpResponse
from django.test import override_settings
from django.urls import include, path

from chaos.services import PrivateRedis, redis_server_binary
from idempotency import idempotent
from idempotency.checks import (
    MESSAGES,
    TENANTS_ENGINE,
    cap,
    check_problem_documentation,
    check_redis_persistence,
    check_settings,
    message,
    protected_views,
    url_views,
)
from idempotency.http.views import policy_of
from tests.support.checks import (
    DJANGO_REDIS,
    DUMMY,
    LOCMEM,
    REDIS,
    check_messages,
    ids,
    one_database,
    only,
    two_databases,
)
from tests.support.faults import caches_with, dead_redis_url, private_redis
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

PACKAGE = Path(__file__).resolve().parent.parent / "idempotency"


def test_every_id_is_an_error_or_a_warning_with_a_message_and_a_hint() -> None:
    assert len(MESSAGES) > 30
    for code, words in MESSAGES.items():
        assert re.fullmatch(r"[EW]\d{3}", code), code
        assert words.msg.strip() and words.hint.strip(), code


def test_every_id_has_one_entry_and_is_raised_by_the_package() -> None:
    """An id no check raises is a retired one: it belongs in the retired list, not here."""
    source = "\n".join(path.read_text() for path in PACKAGE.rglob("*.py"))
    assert {code: source.count(f'"{code}": CheckText(') for code in MESSAGES} == dict.fromkeys(
        MESSAGES, 1
    )
    unused = [code for code in MESSAGES if not re.search(f'"{code}"(?!: CheckText)', source)]
    assert unused == []


def test_message_fills_the_text_and_the_hint_and_picks_the_level() -> None:
    error = message("E001", type="list")
    assert isinstance(error, checks.Error)
    assert error.id == "idempotency.E001"
    assert "list" in error.msg
    assert error.hint == MESSAGES["E001"].hint.format(type="list")
    warning_code = next(code for code in MESSAGES if code.startswith("W"))
    placeholders = re.findall(r"{(\w+)", MESSAGES[warning_code].msg + MESSAGES[warning_code].hint)
    warning = message(warning_code, **dict.fromkeys(placeholders, "x"))
    assert isinstance(warning, checks.Warning) and not isinstance(warning, checks.Error)
    assert warning.id == f"idempotency.{warning_code}"


def test_cap_upper_cases_the_first_letter_only() -> None:
    assert cap("redis store 'x'") == "Redis store 'x'"
    assert cap("") == ""
    assert cap("ÉTAT d'un store") == "ÉTAT d'un store"


def test_defaults_produce_no_messages() -> None:
    assert ids(IDEMPOTENCY={}) == []


def test_no_idempotency_setting_at_all_produces_no_messages(
    settings: Any,
) -> None:
    if hasattr(settings, "IDEMPOTENCY"):
        del settings.IDEMPOTENCY
    settings.DATABASES = one_database()
    assert check_settings() == []


@pytest.mark.parametrize("caches", [LOCMEM, REDIS], ids=["locmem", "redis"])
def test_defaults_produce_no_messages_with_either_cache(caches: dict[str, Any]) -> None:
    assert ids(IDEMPOTENCY={}, CACHES=caches) == []


@pytest.mark.parametrize("value", [["TTL", 5], "TTL=5", 42])
def test_e001_not_a_dict(value: Any) -> None:
    only("E001", IDEMPOTENCY=value)


def test_several_problems_are_all_reported() -> None:
    reported = ids(IDEMPOTENCY={"MODE": "x", "TTL": -1, "ANONYMOUS": "x", "TYPO": 1})
    assert sorted(reported) == [
        "idempotency.E002",
        "idempotency.E004",
        "idempotency.E014",
        "idempotency.E014",
    ]


def test_check_command_fails_on_a_bad_setting() -> None:
    with (
        override_settings(IDEMPOTENCY={"MODE": "sometimes"}),
        pytest.raises(SystemCheckError, match=r"idempotency\.E014"),
    ):
        # databases=[]: no database asked, as before Django 6.0 (since then, naming none
        # asks every alias for its features; this test has no database)
        call_command("check", databases=[])


def test_check_command_reports_warnings_without_failing() -> None:
    out = StringIO()
    err = StringIO()
    with override_settings(IDEMPOTENCY={**using(CACHE_STORE)}, CACHES=LOCMEM):
        call_command("check", databases=[], stdout=out, stderr=err)
    assert "idempotency.W001" in out.getvalue() + err.getvalue()


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
        (locks_using("idempotency.locks.database.DatabaseLockBackend"), "E046"),
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
        "idempotency.stores.database.DatabaseStore",
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


def test_e015_database_option_not_in_databases() -> None:
    only("E015", IDEMPOTENCY=using(DB_STORE, database="records"))
    only("E015", IDEMPOTENCY=tokens_using("database", database="records"))
    only("E015", IDEMPOTENCY=locks_using("postgres", database="records"))
    (message,) = check_messages(IDEMPOTENCY=using(DB_STORE, database="records"))
    assert "IDEMPOTENCY['STORES']['default']['OPTIONS']['database']" in message.msg


def test_e017_atomic_databases() -> None:
    only("E017", IDEMPOTENCY={"ATOMIC_DATABASES": ["nope"]}, DATABASES=two_databases())


def test_w006_a_database_outside_atomic_modes_transaction() -> None:
    only("W006", DATABASES=two_databases())
    assert ids(IDEMPOTENCY={"ATOMIC_DATABASES": ["ledger"]}, DATABASES=two_databases()) == []
    # lease mode has no transaction to leave anything out of
    assert ids(IDEMPOTENCY={"MODE": "lease"}, DATABASES=two_databases()) == []


OTHER_VENDOR = "tests.testapp.otherdb"


def _databases(engine: str) -> dict[str, Any]:
    """The one database ``default``, on ``engine`` (nothing connects: the check reads the
    backend's ``vendor``)."""
    return {"default": {"ENGINE": engine, "NAME": "records"}}


def test_e030_a_database_store_on_a_vendor_it_has_no_sql_for() -> None:
    with override_settings(IDEMPOTENCY={}, DATABASES=_databases(OTHER_VENDOR)):
        messages = [m for m in check_settings() if m.id == "idempotency.E030"]
    assert len(messages) == 1
    text = messages[0].msg + messages[0].hint
    assert "'othervendor'" in text and OTHER_VENDOR in text and "'default'" in text
    assert "RedisStore" in text and "CacheStore" in text


@pytest.mark.parametrize(
    "engine",
    [
        "django.db.backends.sqlite3",
        "django.db.backends.postgresql",
        pytest.param(
            "django.db.backends.mysql",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("MySQLdb") is None, reason="mysqlclient not installed"
            ),
        ),
    ],
)
def test_e030_not_on_the_vendors_with_sql(engine: str) -> None:
    """The same configuration on a database the store has SQL for passes."""
    assert ids(IDEMPOTENCY={}, DATABASES=_databases(engine)) == []


@pytest.mark.parametrize("store", [REDIS_STORE, CACHE_STORE])
def test_e030_not_for_stores_without_sql(store: str) -> None:
    """RedisStore and CacheStore, the stores the message names, are not judged by it
    (their own checks, on their caches, still run)."""
    found = ids(IDEMPOTENCY=using(store), DATABASES=_databases(OTHER_VENDOR))
    assert "idempotency.E030" not in found


def test_e030_names_a_store_on_another_database() -> None:
    databases = {
        "default": django_settings.DATABASES["default"],
        "legacy": _databases(OTHER_VENDOR)["default"],
    }
    with override_settings(IDEMPOTENCY=using(DB_STORE, database="legacy"), DATABASES=databases):
        messages = [m for m in check_settings() if m.id == "idempotency.E030"]
    assert len(messages) == 1 and "'legacy'" in messages[0].msg


def test_check_command_fails_on_a_database_store_without_sql() -> None:
    with (
        override_settings(IDEMPOTENCY={}, DATABASES=_databases(OTHER_VENDOR)),
        pytest.raises(SystemCheckError, match=r"idempotency\.E030"),
    ):
        call_command("check", databases=[])


# -- issue 43, finding 4: tenants under the default scope ---------------------------------


class ReadsAndWritesDefault:
    """A router that routes nothing anywhere else (any router counts for W051)."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return "default"


ROUTERS = [f"{__name__}.ReadsAndWritesDefault"]
TENANTS = {"default": {**django_settings.DATABASES["default"], "ENGINE": TENANTS_ENGINE}}


def _reported(**overrides: Any) -> str:
    """What ``manage.py check`` prints under ``overrides`` (warnings do not fail it)."""
    out, err = StringIO(), StringIO()
    with override_settings(**overrides):
        call_command("check", databases=[], stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def test_w050_django_tenants_under_the_default_scope() -> None:
    only("W050", DATABASES=TENANTS)
    # with a scope that names the tenant's schema: quiet
    tenant = {"SCOPE": "idempotency.scopes.tenant_schema_scope"}
    assert ids(IDEMPOTENCY=tenant, DATABASES=TENANTS) == []
    assert "idempotency.W050" in _reported(DATABASES=TENANTS)


def test_w051_database_routers_under_the_default_scope() -> None:
    only("W051", DATABASE_ROUTERS=ROUTERS)
    mine = {"SCOPE": "idempotency.scopes.tenant_schema_scope"}
    assert ids(IDEMPOTENCY=mine, DATABASE_ROUTERS=ROUTERS) == []
    assert ids(DATABASES=TENANTS, DATABASE_ROUTERS=ROUTERS) == ["idempotency.W050"]
    assert "idempotency.W051" in _reported(DATABASE_ROUTERS=ROUTERS)


@pytest.mark.parametrize(
    "setting",
    [
        using(REDIS_STORE),
        locks_using("redis"),
        locks_using("idempotency.locks.redis.RedisLockBackend"),
        tokens_using("redis"),
        tokens_using("idempotency.tokens.redis.RedisTokens"),
    ],
    ids=["store", "locks", "locks-path", "tokens", "tokens-path"],
)
def test_e007_redis_needed_but_the_cache_is_not_a_redis_cache(setting: dict[str, Any]) -> None:
    only("E007", IDEMPOTENCY=setting, CACHES=LOCMEM)
    assert ids(IDEMPOTENCY=setting, CACHES=REDIS) == []
    assert ids(IDEMPOTENCY=setting, CACHES=DJANGO_REDIS) == []


def test_e007_django_redis_with_a_client_the_store_cannot_follow() -> None:
    sentinel = {
        "default": {
            **DJANGO_REDIS["default"],
            "OPTIONS": {"CLIENT_CLASS": "django_redis.client.SentinelClient"},
        }
    }
    only("E007", IDEMPOTENCY=using(REDIS_STORE), CACHES=sentinel)


def test_e007_redis_alias_missing() -> None:
    only("E007", IDEMPOTENCY=using(REDIS_STORE, cache="redis"), CACHES=REDIS)


def test_e007_silent_for_a_location() -> None:
    """A Redis backend with a LOCATION needs only redis-py, not a django-redis cache."""
    setting = using(REDIS_STORE, location="redis://127.0.0.1:6379/7")
    assert ids(IDEMPOTENCY=setting, CACHES=LOCMEM) == []


def test_the_default_locks_are_checked_only_when_set() -> None:
    """LOCKS defaults to Redis, inert until a lock is taken: no E007 until it is set."""
    assert ids(IDEMPOTENCY={}, CACHES=LOCMEM) == []
    only("E007", IDEMPOTENCY=locks_using("redis"), CACHES=LOCMEM)


def test_e007_redis_py_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "redis" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with override_settings(
        IDEMPOTENCY={**using(REDIS_STORE)}, CACHES=REDIS, DATABASES=one_database()
    ):
        (message,) = check_settings()
    assert message.id == "idempotency.E007"
    assert "not installed" in message.msg


def _persistence_ids(server_url: str, **idempotency: Any) -> list[str]:
    with override_settings(
        CACHES=caches_with("private", server_url),
        IDEMPOTENCY=idempotency,
    ):
        return [message.id or "" for message in check_redis_persistence()]


def test_w007_redis_without_persistence_behind_the_store() -> None:
    with private_redis(aof=False) as server:
        store, tokens = using(REDIS_STORE, cache="private"), tokens_using("redis", cache="private")
        assert _persistence_ids(server.url, **store) == ["idempotency.W007"]
        assert _persistence_ids(server.url, **tokens) == ["idempotency.W007"]
        assert _persistence_ids(server.url) == []  # nothing keeps records in that Redis


def _w007(server_url: str) -> list[str]:
    with override_settings(
        CACHES=caches_with("private", server_url),
        IDEMPOTENCY=using(REDIS_STORE, cache="private"),
    ):
        return [message.msg for message in check_redis_persistence()]


def test_w007_silent_with_aof_fsynced_every_second_or_every_write() -> None:
    """What the docs recommend (Redis durability): AOF with appendfsync everysec (a
    machine crash loses about the last second) or always; RDB snapshots alone, or an AOF
    whose fsync is left to the kernel, are warned about."""
    with private_redis(aof=True) as server:
        admin = server.client()
        assert _w007(server.url) == []  # appendfsync always
        admin.config_set("appendfsync", "everysec")  # type: ignore[attr-defined]
        assert _w007(server.url) == []
        admin.config_set("appendfsync", "no")  # type: ignore[attr-defined]
        (fsync_no,) = _w007(server.url)
    with private_redis(aof=False) as server:
        server.client().config_set("save", "3600 1")  # type: ignore[attr-defined]
        (rdb_only,) = _w007(server.url)
    assert "(appendfsync no): a machine crash forgets" in fsync_no
    assert 'only RDB snapshots (appendonly no, save "3600 1")' in rdb_only


def test_w007_tolerates_a_server_that_forbids_config() -> None:
    if redis_server_binary() is None:
        pytest.skip("needs redis-server")
    with PrivateRedis(extra=("--rename-command", "CONFIG", '""')) as server:
        assert _persistence_ids(server.url, **using(REDIS_STORE, cache="private")) == []


def test_w007_tolerates_an_unreachable_server() -> None:
    assert _persistence_ids(dead_redis_url(), **using(REDIS_STORE, cache="private")) == []


def test_check_deploy_reports_w007() -> None:
    with (
        private_redis(aof=False) as server,
        override_settings(
            CACHES=caches_with("private", server.url),
            IDEMPOTENCY=using(REDIS_STORE, cache="private"),
        ),
    ):
        out, err = StringIO(), StringIO()
        report = ""
        try:
            # databases=[]: no database asked, as before Django 6.0 (since then, naming none
            # asks every alias for its features; this test has no database)
            call_command("check", "--deploy", databases=[], stdout=out, stderr=err)
        except SystemCheckError as exc:  # other deploy checks may fail on test settings
            report = str(exc)
        assert "idempotency.W007" in out.getvalue() + err.getvalue() + report


def test_w007_names_a_location_without_its_password() -> None:
    with private_redis(aof=False) as server:
        # the server asks for the password: redis-py 5.0 fails to connect when it sends
        # one that the server does not expect, and the check then cannot read its config
        admin = server.client()
        admin.config_set("requirepass", "secret")  # type: ignore[attr-defined]
        try:
            url = server.url.replace("redis://", "redis://:secret@", 1)
            with override_settings(IDEMPOTENCY=using(REDIS_STORE, location=url)):
                (warning,) = check_redis_persistence()
        finally:
            admin.config_set("requirepass", "")  # type: ignore[attr-defined]
    assert warning.id == "idempotency.W007"
    assert "secret" not in warning.msg and server.url.partition("://")[2] in warning.msg


def test_e002_unknown_key_suggests_the_close_one() -> None:
    with override_settings(IDEMPOTENCY={"TLL": 60}, DATABASES=one_database()):
        (message,) = check_settings()
    assert message.id == "idempotency.E002"
    assert "'TLL'" in message.msg
    assert "Did you mean 'TTL'?" in (message.hint or "")


def test_e014_mode() -> None:
    only("E014", IDEMPOTENCY={"MODE": "fast"})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TTL", 0),
        ("TTL", -1),
        ("TTL", "86400"),
        ("TTL", float("inf")),
        ("LEASE", None),
        ("WAIT", -0.5),
        ("LOCK_TIMEOUT", 0),
        ("LOCK_TIMEOUT", "soon"),
        ("RETRY_AFTER", True),
        ("SUBMIT_TOKEN_TTL", 0),
        ("PURGE_BATCH_SIZE", 0),
        ("PURGE_BATCH_SIZE", 10.5),
    ],
)
def test_e004_not_a_positive_number(name: str, value: Any) -> None:
    only("E004", IDEMPOTENCY={name: value})


@pytest.mark.parametrize(
    "setting",
    [
        {"WAIT": 0},
        {"WAIT": 2.5},
        {"TTL": 0.5, "LEASE": 0.5},
        {"PURGE_BATCH_SIZE": 1},
        {"MAX_RESPONSE_BYTES": None},
        {"MAX_RESPONSE_BYTES": 1},
        {"LOCK_TIMEOUT": None},
        {"LOCK_TIMEOUT": 2},
    ],
)
def test_e004_accepts_valid_numbers(setting: dict[str, Any]) -> None:
    assert ids(IDEMPOTENCY=setting) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SCOPE", "idempotency.scopes.no_such_scope"),
        ("FINGERPRINT", "nodots"),
        ("FINGERPRINT", 42),
    ],
)
def test_e005_dotted_path_not_importable(name: str, value: Any) -> None:
    only("E005", IDEMPOTENCY={name: value})


def test_e005_accepts_objects_instead_of_paths() -> None:
    assert ids(IDEMPOTENCY={"SCOPE": lambda request: "x"}) == []


def test_e014_anonymous() -> None:
    only("E014", IDEMPOTENCY={"ANONYMOUS": "allow"})


@pytest.mark.parametrize(
    "setting",
    [
        {"HEADER": "Idempotency Key"},
        {"HEADER": ""},
        {"HEADER": "Idempotency-Key:"},
        {"HEADER": None},
        {"SUBMIT_TOKEN_HEADER": "X-Submit/Token"},
        {"FINGERPRINT_HEADERS": ["Accept", "Bad Header"]},
        {"REPLAY_HEADERS": ["Location", "Bad:Header"]},
    ],
)
def test_e010_header_names(setting: dict[str, Any]) -> None:
    only("E010", IDEMPOTENCY=setting)


def test_e010_accepts_token_names() -> None:
    assert ids(IDEMPOTENCY={"HEADER": "X-Request-Key_2", "FINGERPRINT_HEADERS": ["Accept"]}) == []


@pytest.mark.parametrize(
    "value",
    [
        ["Location", "Set-Cookie"],
        ["set-cookie"],
        ["Transfer-Encoding"],
    ],
)
def test_e011_replay_headers(value: Any) -> None:
    only("E011", IDEMPOTENCY={"REPLAY_HEADERS": value})


@pytest.mark.parametrize(
    "setting",
    [
        {"FINGERPRINT_HEADERS": "Accept"},
        {"REPLAY_HEADERS": "Location"},
        {"REPLAY_HEADERS": ["Location", 7]},
        {"REPLAY_HEADERS": None},
    ],
)
def test_e004_header_lists_that_are_not_lists_of_names(setting: dict[str, Any]) -> None:
    only("E004", IDEMPOTENCY=setting)


@pytest.mark.parametrize("value", [0, -1, 1.5, "1MB", True])
def test_e004_max_response_bytes(value: Any) -> None:
    only("E004", IDEMPOTENCY={"MAX_RESPONSE_BYTES": value})


def test_e014_atomic_claim_choices() -> None:
    only("E014", IDEMPOTENCY={"ATOMIC_CLAIM": "last"})
    assert ids(IDEMPOTENCY={"ATOMIC_CLAIM": "optimistic"}) == []


def test_e016_ttl_shorter_than_the_lease() -> None:
    only("E016", IDEMPOTENCY={"TTL": 30, "LEASE": 60})
    assert ids(IDEMPOTENCY={"TTL": 60, "LEASE": 60}) == []


@pytest.mark.parametrize("value", ["ledger", [1]])
def test_e004_atomic_databases_not_a_list_of_aliases(value: Any) -> None:
    only("E004", IDEMPOTENCY={"ATOMIC_DATABASES": value}, DATABASES=two_databases())


def test_e018_metrics_without_prometheus_client(monkeypatch: pytest.MonkeyPatch) -> None:

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "prometheus_client" else find_spec(name, *a),
    )
    only("E018", IDEMPOTENCY={"METRICS": True})
    assert ids(IDEMPOTENCY={"METRICS": False}) == []


def test_e020_opentelemetry_without_its_api(monkeypatch: pytest.MonkeyPatch) -> None:

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith("opentelemetry") else find_spec(name, *a),
    )
    only("E043", IDEMPOTENCY={"OPENTELEMETRY": True})
    assert ids(IDEMPOTENCY={"OPENTELEMETRY": False}) == []


def test_w041_the_default_problem_type_base_asks_for_the_projects_own() -> None:
    with override_settings(IDEMPOTENCY={}):
        (warning,) = check_problem_documentation()
    assert warning.id == "idempotency.W041"
    assert "https://django-idempotency.dev/problems/" in warning.msg
    assert "PROBLEM_TYPE_BASE" in (warning.hint or "")
    with override_settings(IDEMPOTENCY={"PROBLEM_TYPE_BASE": "https://api.example.com/e/"}):
        assert check_problem_documentation() == []


def test_w041_is_reported_by_check_deploy_only() -> None:
    def report(*args: str) -> str:
        out = StringIO()
        try:
            call_command("check", *args, databases=[], stdout=out, stderr=out)
        except SystemCheckError as exc:  # other deploy checks may fail on test settings
            out.write(str(exc))
        return out.getvalue()

    with override_settings(IDEMPOTENCY={}, DATABASES=one_database()):
        assert "idempotency.W041" not in report()
        assert "idempotency.W041" in report("--deploy")


# -- the protected views of a URLconf (this module is one) ----------------------------------


@idempotent(ttl=60)
def keyed_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


def unkeyed_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


urlpatterns = [
    path("keyed", keyed_view, name="keyed"),
    path("plain", unkeyed_view, name="plain"),
    path("shop/", include(([path("pay", keyed_view, name="pay")], "shop"))),
]


def test_protected_views_names_each_view_with_its_policy_once() -> None:
    found = list(protected_views(__name__))
    assert found == [("keyed", policy_of(keyed_view)), ("shop:pay", policy_of(keyed_view))]
    assert [name for name, _ in url_views(__name__)] == ["keyed", "plain", "shop:pay"]
