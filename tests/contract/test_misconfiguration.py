"""Misconfiguration is caught at startup (checks walk the URL patterns), and a store that
still fails at run time answers a clear problem, never a bare 500."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client, override_settings

from idempotency.checks import check_redis_persistence, check_settings
from idempotency.conf import SETTINGS
from tests.testapp import misconfigured_views as views

LOCMEM = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
DUMMY = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
AUTH = "django.contrib.auth.middleware.AuthenticationMiddleware"
IDEM = "idempotency.IdempotencyMiddleware"


def messages(urlconf: Any, **overrides: Any) -> list[Any]:
    with override_settings(ROOT_URLCONF=urlconf, **overrides):
        return [m for m in check_settings() if m.id not in ("idempotency.W006",)]


def by_id(found: list[Any], code: str) -> list[str]:
    return [m.msg for m in found if m.id == f"idempotency.{code}"]


# -- the settings' own description drives the checks -------------------------------------

INVALID = {
    "bool": "yes",
    "text": 5,
    "seconds": -1,
    "integer": 1.5,
    "choice": "nonsense",
    "path": "no_such_module.thing",
    "backends": "no_such_module.Backend",
    "header": "bad header",
    "headers": "Accept",
    "names": "field",
    "cache": 5,
    "database": 5,
    "aliases": "ledger",
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_every_setting_is_validated_from_its_description(name: str) -> None:
    setting = SETTINGS[name]
    with override_settings(IDEMPOTENCY={name: INVALID[setting.kind]}):
        found = check_settings()
    named = [m for m in found if f"IDEMPOTENCY[{name!r}]" in m.msg]
    assert named, f"{name}: {[m.msg for m in found]}"
    assert all(m.level >= 40 for m in named)  # errors


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_every_default_and_boundary_is_accepted(name: str) -> None:
    setting = SETTINGS[name]
    assert setting.accepts(setting.default)
    if setting.nullable:
        assert setting.accepts(None)
    else:
        assert not setting.accepts(None)
    if setting.kind in ("seconds", "integer"):
        assert setting.accepts(setting.minimum) is setting.inclusive


def test_a_wrong_number_is_explained_by_the_settings_own_help() -> None:
    with override_settings(IDEMPOTENCY={"LEASE": 0}):
        (message,) = [m for m in check_settings() if m.id == "idempotency.E004"]
    assert "must be a number > 0" in message.msg
    assert SETTINGS["LEASE"].help in (message.hint or "")


# -- per-view stores, found through the URL patterns --------------------------------------


def test_e007_for_the_redis_stores_of_views() -> None:
    (text,) = by_id(messages(views.RedisViews, CACHES=LOCMEM), "E007")
    for name in ("redis-function", "redis-async", "redis-mixin"):
        assert repr(name) in text
    assert "not a Redis cache" in text


@pytest.mark.redis
def test_no_e007_when_the_views_redis_is_there() -> None:
    from tests.support.faults import caches_with

    found = messages(views.RedisViews, CACHES=caches_with("default", _redis_url()))
    assert by_id(found, "E007") == []


def _redis_url() -> str:
    from tests.support.services import redis_url

    return redis_url()


def test_cache_stores_of_views_are_checked() -> None:
    found = messages(views.CacheViews, CACHES=LOCMEM)
    (text,) = by_id(found, "E008")
    assert "'cache-function'" in text and "'records'" in text
    dummy = {**DUMMY, "records": DUMMY["default"]}
    assert any(
        "'cache-function'" in t for t in by_id(messages(views.CacheViews, CACHES=dummy), "E012")
    )


def test_e006_for_a_view_asking_atomic_mode_of_a_store_that_cannot() -> None:
    (text,) = by_id(messages(views.AtomicViews, CACHES=LOCMEM), "E006")
    assert "'atomic-redis'" in text and "RedisStore" in text


def test_e013_for_a_view_store_that_is_no_alias() -> None:
    (text,) = by_id(messages(views.NotAStoreViews), "E013")
    assert "'not-a-store'" in text and "'no-such-store'" in text


def test_e013_for_the_store_of_a_ninja_operation() -> None:
    """The checks read the policies of Django Ninja operations behind their URL paths."""
    (text,) = by_id(messages(views.NinjaNotAStoreViews), "E013")
    assert "ninja-not-a-store" in text


def test_the_check_command_fails_on_a_views_store() -> None:
    with (
        override_settings(ROOT_URLCONF=views.RedisViews, CACHES=LOCMEM),
        pytest.raises(SystemCheckError, match=r"idempotency\.E007"),
    ):
        # databases=[]: no database asked, as before Django 6.0 (since then, naming none
        # asks every alias for its features; this test has no database)
        call_command("check", databases=[])


def test_w007_for_the_redis_stores_of_views() -> None:
    from tests.support.faults import caches_with, private_redis

    with (
        private_redis(aof=False) as server,
        override_settings(ROOT_URLCONF=views.RedisViews, CACHES=caches_with("default", server.url)),
    ):
        (warning,) = check_redis_persistence()
    assert warning.id == "idempotency.W007"
    assert "'redis-function'" in warning.msg
    assert warning.msg.startswith("The Redis behind the "), warning.msg  # one capital, not two


# -- IdempotencyMiddleware before AuthenticationMiddleware ----------------------------------


def test_e019_idempotency_middleware_before_authentication(settings: Any) -> None:
    rest = [m for m in settings.MIDDLEWARE if m not in (AUTH, IDEM)]
    with override_settings(MIDDLEWARE=[IDEM, *rest, AUTH]):
        (message,) = [m for m in check_settings() if m.id == "idempotency.E019"]
    assert "Move 'idempotency.IdempotencyMiddleware' below" in (message.hint or "")
    for good in ([*rest, AUTH, IDEM], [AUTH, IDEM, *rest], rest):
        with override_settings(MIDDLEWARE=good):
            assert not [m for m in check_settings() if m.id == "idempotency.E019"]


def test_e019_recognises_subclasses_and_every_path(settings: Any) -> None:
    path = "idempotency.http.middleware.IdempotencyMiddleware"
    with override_settings(MIDDLEWARE=[path, AUTH]):
        assert [m.id for m in check_settings() if m.id == "idempotency.E019"]


# -- at run time: a clear 503 problem, the cause in the log, the view never runs -----------


@pytest.fixture
def logged_in(client_a: Client) -> Client:
    views.RAN.clear()
    return client_a


@pytest.mark.parametrize("path", ["/redis/", "/redis-async/", "/redis-mixin/", "/atomic/"])
def test_a_misconfigured_view_store_answers_a_problem(
    logged_in: Client, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    urlconf = views.AtomicViews if path == "/atomic/" else views.RedisViews
    with override_settings(ROOT_URLCONF=urlconf, CACHES=LOCMEM), caplog.at_level(logging.ERROR):
        response = logged_in.post(path, {}, HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 503
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content)["code"] == "idempotency-store-misconfigured"
    assert views.RAN == []
    assert any(r.exc_info and "ImproperlyConfigured" in repr(r.exc_info[0]) for r in caplog.records)


def test_without_a_key_the_view_runs(logged_in: Client) -> None:
    with override_settings(ROOT_URLCONF=views.RedisViews, CACHES=LOCMEM):
        assert logged_in.post("/redis/", {}).status_code == 201
    assert views.RAN == ["/redis/"]
