"""The Redis behind stores, tokens and locks (idempotency.checks.redis): E007, a django-redis
connection it cannot have; and ``check --deploy``'s W007, a Redis that persists nothing (a
private Redis with and without AOF or RDB, one that forbids CONFIG, one that cannot be
reached)."""

from __future__ import annotations

import importlib.util
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from chaos.services import PrivateRedis, redis_server_binary
from idempotency.checks import check_redis_persistence, check_settings
from tests.support.checks import DJANGO_REDIS, LOCMEM, REDIS, ids, one_database, only
from tests.support.faults import caches_with, dead_redis_url, private_redis
from tests.support.stores import REDIS_STORE, locks_using, tokens_using, using


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
