"""System checks: every id, the check command, and silence for the defaults (the deploy
check of the Redis behind the store is in ``test_checks_deploy.py``)."""

from __future__ import annotations

import importlib.util
from io import StringIO
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from idempotency.checks import MESSAGES, check_settings
from tests.support.stores import CACHE_STORE, REDIS_STORE

LOCMEM = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
DUMMY = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
REDIS = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://127.0.0.1:6379/15",
    }
}


def _one_database() -> dict[str, Any]:
    return {"default": django_settings.DATABASES["default"]}


def ids(**overrides: Any) -> list[str]:
    """The ids check_settings reports with ``overrides`` in place (one database unless
    the overrides name others)."""
    overrides.setdefault("DATABASES", _one_database())
    with override_settings(**overrides):
        return [message.id or "" for message in check_settings()]


def only(code: str, **overrides: Any) -> None:
    assert ids(**overrides) == [f"idempotency.{code}"]


# -- defaults ---------------------------------------------------------------------------


def test_defaults_produce_no_messages() -> None:
    assert ids(IDEMPOTENCY={}) == []


def test_no_idempotency_setting_at_all_produces_no_messages(
    settings: Any,
) -> None:
    if hasattr(settings, "IDEMPOTENCY"):
        del settings.IDEMPOTENCY
    settings.DATABASES = _one_database()
    assert check_settings() == []


@pytest.mark.parametrize("caches", [LOCMEM, REDIS], ids=["locmem", "redis"])
def test_defaults_produce_no_messages_with_either_cache(caches: dict[str, Any]) -> None:
    assert ids(IDEMPOTENCY={}, CACHES=caches) == []


def test_every_message_has_a_hint_and_a_well_formed_id() -> None:
    for code, message in MESSAGES.items():
        assert code[0] in "EW" and code[1:].isdigit() and len(code) == 4
        assert message.msg and message.hint


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [["TTL", 5], "TTL=5", 42])
def test_e001_not_a_dict(value: Any) -> None:
    only("E001", IDEMPOTENCY=value)


def test_e002_unknown_key_suggests_the_close_one() -> None:
    with override_settings(IDEMPOTENCY={"TLL": 60}, DATABASES=_one_database()):
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
        ("STORE", "idempotency.stores.NoSuchStore"),
        ("STORE", "no_such_module.Store"),
        ("SCOPE", "idempotency.scopes.no_such_scope"),
        ("FINGERPRINT", "nodots"),
        ("FINGERPRINT", 42),
    ],
)
def test_e005_dotted_path_not_importable(name: str, value: Any) -> None:
    only("E005", IDEMPOTENCY={name: value})


def test_e005_accepts_objects_instead_of_paths() -> None:
    from idempotency.stores.database import DatabaseStore

    assert ids(IDEMPOTENCY={"STORE": DatabaseStore, "SCOPE": lambda request: "x"}) == []


@pytest.mark.parametrize("store", [CACHE_STORE, REDIS_STORE])
def test_e006_atomic_mode_with_a_store_that_cannot(store: str) -> None:
    assert "idempotency.E006" in ids(IDEMPOTENCY={"MODE": "atomic", "STORE": store}, CACHES=REDIS)
    assert "idempotency.E006" not in ids(IDEMPOTENCY={"MODE": "atomic"})


@pytest.mark.parametrize(
    "setting",
    [
        {"STORE": REDIS_STORE},
        {"LOCK_BACKEND": "redis"},
        {"LOCK_BACKEND": "idempotency.locks.redis.RedisLockBackend"},
        {"SUBMIT_TOKEN_BACKEND": "redis"},
        {"SUBMIT_TOKEN_BACKEND": "idempotency.tokens.redis.RedisTokens"},
    ],
)
def test_e007_redis_needed_but_the_cache_is_not_django_redis(setting: dict[str, Any]) -> None:
    only("E007", IDEMPOTENCY=setting, CACHES=LOCMEM)
    assert ids(IDEMPOTENCY=setting, CACHES=REDIS) == []


def test_e007_redis_alias_missing() -> None:
    only("E007", IDEMPOTENCY={"STORE": REDIS_STORE, "REDIS_ALIAS": "redis"}, CACHES=REDIS)


def test_e007_django_redis_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "django_redis" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with override_settings(
        IDEMPOTENCY={"STORE": REDIS_STORE}, CACHES=REDIS, DATABASES=_one_database()
    ):
        (message,) = check_settings()
    assert message.id == "idempotency.E007"
    assert "not installed" in message.msg


def test_e008_cache_alias_not_in_caches() -> None:
    only("E008", IDEMPOTENCY={"RESPONSE_CACHE": "responses"}, CACHES=REDIS)
    only("E008", IDEMPOTENCY={"STORE": CACHE_STORE, "CACHE_ALIAS": "records"}, CACHES=REDIS)


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


def test_e012_cache_store_on_dummy_cache() -> None:
    only("E012", IDEMPOTENCY={"STORE": CACHE_STORE}, CACHES=DUMMY)


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
    only("E020", IDEMPOTENCY={"STORE": CACHE_STORE}, CACHES=FILE_CACHE)
    only("E020", IDEMPOTENCY={"RESPONSE_CACHE": "default"}, CACHES=FILE_CACHE)
    # the caches read raw (Redis) or in-process are fine
    assert ids(IDEMPOTENCY={"STORE": CACHE_STORE}, CACHES=REDIS) == []
    assert ids(IDEMPOTENCY={"RESPONSE_CACHE": "default"}, CACHES=BUILTIN_REDIS) == []


def test_e013_store_is_not_a_store_class() -> None:
    only("E013", IDEMPOTENCY={"STORE": "collections.OrderedDict"})


@pytest.mark.parametrize(
    ("setting", "code"),
    [
        ({"LOCK_BACKEND": "zookeeper"}, "E044"),
        ({"SUBMIT_TOKEN_BACKEND": "tokens.Missing"}, "E044"),
        ({"SUBMIT_TOKEN_BACKEND": 1}, "E045"),
        ({"LOCK_BACKEND": "idempotency.tokens.database.DatabaseTokens"}, "E045"),
        ({"LOCK_BACKEND": "idempotency.locks.base.DatabaseLockBackend"}, "E046"),
    ],
)
def test_e044_e045_e046_backends(setting: dict[str, Any], code: str) -> None:
    """A backend that cannot be imported (E044), is no subclass of its base class (E045)
    or leaves abstract methods unimplemented (E046); more in tests/test_backends.py."""
    only(code, IDEMPOTENCY=setting)


def test_e015_database_alias_not_in_databases() -> None:
    only("E015", IDEMPOTENCY={"DATABASE_ALIAS": "records"})


@pytest.mark.parametrize("value", [0, -1, 1.5, "1MB", True])
def test_e004_max_response_bytes(value: Any) -> None:
    only("E004", IDEMPOTENCY={"MAX_RESPONSE_BYTES": value})


def test_e014_atomic_claim_choices() -> None:
    only("E014", IDEMPOTENCY={"ATOMIC_CLAIM": "last"})
    assert ids(IDEMPOTENCY={"ATOMIC_CLAIM": "optimistic"}) == []


def test_e016_ttl_shorter_than_the_lease() -> None:
    only("E016", IDEMPOTENCY={"TTL": 30, "LEASE": 60})
    assert ids(IDEMPOTENCY={"TTL": 60, "LEASE": 60}) == []


def _two_databases() -> dict[str, Any]:
    default = django_settings.DATABASES["default"]
    return {"default": default, "ledger": {**default, "NAME": "ledger.sqlite3"}}


def test_e017_atomic_databases() -> None:
    only("E017", IDEMPOTENCY={"ATOMIC_DATABASES": ["nope"]}, DATABASES=_two_databases())


@pytest.mark.parametrize("value", ["ledger", [1]])
def test_e004_atomic_databases_not_a_list_of_aliases(value: Any) -> None:
    only("E004", IDEMPOTENCY={"ATOMIC_DATABASES": value}, DATABASES=_two_databases())


def test_w006_a_database_outside_atomic_modes_transaction() -> None:
    only("W006", DATABASES=_two_databases())
    assert ids(IDEMPOTENCY={"ATOMIC_DATABASES": ["ledger"]}, DATABASES=_two_databases()) == []
    # lease mode has no transaction to leave anything out of
    assert ids(IDEMPOTENCY={"MODE": "lease"}, DATABASES=_two_databases()) == []


def test_e018_metrics_without_prometheus_client(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "prometheus_client" else find_spec(name, *a),
    )
    only("E018", IDEMPOTENCY={"METRICS": True})
    assert ids(IDEMPOTENCY={"METRICS": False}) == []


def test_e020_opentelemetry_without_its_api(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith("opentelemetry") else find_spec(name, *a),
    )
    only("E043", IDEMPOTENCY={"OPENTELEMETRY": True})
    assert ids(IDEMPOTENCY={"OPENTELEMETRY": False}) == []


# -- warnings ---------------------------------------------------------------------------


def test_w001_cache_store_on_locmem() -> None:
    only("W001", IDEMPOTENCY={"STORE": CACHE_STORE}, CACHES=LOCMEM)
    assert ids(IDEMPOTENCY={"STORE": CACHE_STORE}, CACHES=REDIS) == []


def test_w003_response_cache_on_locmem() -> None:
    only("W003", IDEMPOTENCY={"RESPONSE_CACHE": "default"}, CACHES=LOCMEM)
    assert ids(IDEMPOTENCY={"RESPONSE_CACHE": "default"}, CACHES=REDIS) == []


@pytest.fixture
def atomic_requests() -> dict[str, Any]:
    """DATABASES as configured, with ATOMIC_REQUESTS on for the default database."""
    return {
        alias: {**config, "ATOMIC_REQUESTS": alias == "default"}
        for alias, config in _one_database().items()
    }


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_w004_atomic_requests_with_lease_mode(atomic_requests: dict[str, Any]) -> None:
    only("W004", IDEMPOTENCY={"MODE": "lease"}, DATABASES=atomic_requests)
    # atomic mode, or a lease kept outside the database, is fine
    assert ids(IDEMPOTENCY={"MODE": "auto"}, DATABASES=atomic_requests) == []
    assert (
        ids(
            IDEMPOTENCY={"MODE": "lease", "STORE": REDIS_STORE},
            DATABASES=atomic_requests,
            CACHES=REDIS,
        )
        == []
    )


def test_w005_response_cache_unused_by_the_store() -> None:
    only("W005", IDEMPOTENCY={"STORE": REDIS_STORE, "RESPONSE_CACHE": "default"}, CACHES=REDIS)


def test_several_problems_are_all_reported() -> None:
    reported = ids(IDEMPOTENCY={"MODE": "x", "TTL": -1, "ANONYMOUS": "x", "TYPO": 1})
    assert sorted(reported) == [
        "idempotency.E002",
        "idempotency.E004",
        "idempotency.E014",
        "idempotency.E014",
    ]


# -- through Django's check framework ------------------------------------------------------


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
    with override_settings(IDEMPOTENCY={"STORE": CACHE_STORE}, CACHES=LOCMEM):
        call_command("check", databases=[], stdout=out, stderr=err)
    assert "idempotency.W001" in out.getvalue() + err.getvalue()


# -- E030: a database DatabaseStore has no SQL for --------------------------------------------

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
    found = ids(IDEMPOTENCY={"STORE": store}, DATABASES=_databases(OTHER_VENDOR))
    assert "idempotency.E030" not in found


def test_e030_names_a_store_instance_on_another_alias() -> None:
    from idempotency.stores.database import DatabaseStore

    databases = {
        "default": django_settings.DATABASES["default"],
        "legacy": _databases(OTHER_VENDOR)["default"],
    }
    store = DatabaseStore(using="legacy")
    with override_settings(IDEMPOTENCY={"STORE": store}, DATABASES=databases):
        messages = [m for m in check_settings() if m.id == "idempotency.E030"]
    assert len(messages) == 1 and "'legacy'" in messages[0].msg


def test_check_command_fails_on_a_database_store_without_sql() -> None:
    with (
        override_settings(IDEMPOTENCY={}, DATABASES=_databases(OTHER_VENDOR)),
        pytest.raises(SystemCheckError, match=r"idempotency\.E030"),
    ):
        call_command("check", databases=[])
