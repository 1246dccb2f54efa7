"""Every entry point names its store by alias (``store="records"``): the decorator, the
mixin, Ninja (a decorated operation and a protected router), idempotent functions and
Celery tasks; IdempotencyMiddleware uses the "default" alias. Each keeps its records in
the store the alias configures (a CacheStore here, never the database), and replays from
it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings

from idempotency.models import IdempotencyRecord
from idempotency.stores.base import stores
from idempotency.stores.cache import CacheStore
from tests.support.http import post
from tests.support.stores import CACHE_STORE, DB_STORE, entry
from tests.support.stores import stores as stores_setting
from tests.testapp import alias_views

pytestmark = pytest.mark.django_db(transaction=True)

LOCMEM = "django.core.cache.backends.locmem.LocMemCache"
CACHES = {
    "default": {"BACKEND": LOCMEM},
    "records": {"BACKEND": LOCMEM, "LOCATION": "alias-records"},
}
#: "default" a database store, "records" a cache store on the cache "records"
ALIASES = {
    "STORES": {
        **stores_setting(DB_STORE),
        "records": entry(CACHE_STORE, cache="records", key_prefix="aliased"),
    }
}
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "idempotency.IdempotencyMiddleware",
]


@pytest.fixture(autouse=True)
def aliased() -> Iterator[None]:
    alias_views.RUNS.clear()
    with override_settings(
        IDEMPOTENCY=ALIASES,
        CACHES=CACHES,
        MIDDLEWARE=MIDDLEWARE,
        ROOT_URLCONF="tests.testapp.alias_views",
    ):
        yield


def in_records(scope: str, key: str) -> bool:
    """Whether the store of the alias "records" holds a record of ``(scope, key)`` (a
    lookup under another fingerprint finds it as a mismatch: present)."""
    store = stores["records"]
    assert isinstance(store, CacheStore) and store.key_prefix == "aliased"
    return store.lookup(scope, key, fingerprint="another") is not None


@pytest.mark.parametrize("url", ["/decorated/", "/mixin/", "/n/decorated/", "/n/r/protected/"])
def test_a_view_keeps_its_records_in_the_store_its_alias_names(client_a: Client, url: str) -> None:
    key = str(uuid.uuid4())
    first, again = post(client_a, url, key=key), post(client_a, url, key=key)
    assert first.status_code in (200, 201), first.content
    assert json.loads(first.content)["run"] == 1
    assert again["Idempotent-Replayed"] == "true" and again.content == first.content
    scope = f"auth.user:{client_a.session['_auth_user_id']}"
    assert in_records(scope, key)
    assert not IdempotencyRecord.objects.filter(key=key).exists()


def test_the_middleware_uses_the_default_alias(client_a: Client) -> None:
    key = str(uuid.uuid4())
    first, again = post(client_a, "/plain/", key=key), post(client_a, "/plain/", key=key)
    assert json.loads(first.content)["run"] == 1
    assert again["Idempotent-Replayed"] == "true"
    assert IdempotencyRecord.objects.filter(key=key).exists()  # "default": the database
    # the default alias made a cache store: the middleware follows it
    with override_settings(
        IDEMPOTENCY={
            **ALIASES,
            "STORES": {
                **ALIASES["STORES"],
                "default": entry(CACHE_STORE, cache="records", key_prefix="aliased"),
            },
        }
    ):
        other = str(uuid.uuid4())
        assert json.loads(post(client_a, "/plain/", key=other).content)["run"] == 1
        assert post(client_a, "/plain/", key=other)["Idempotent-Replayed"] == "true"
        assert in_records(f"auth.user:{client_a.session['_auth_user_id']}", other)
    assert not IdempotencyRecord.objects.filter(key=other).exists()


def test_a_function_keeps_its_records_in_the_store_its_alias_names() -> None:
    ref = uuid.uuid4().hex
    assert alias_views.function(ref) == 1
    assert alias_views.function(ref) == 1  # replayed
    assert in_records("functions", f"alias:{ref}")
    assert not IdempotencyRecord.objects.filter(key=f"alias:{ref}").exists()


def test_a_task_keeps_its_records_in_the_store_its_alias_names() -> None:
    ref = uuid.uuid4().hex
    assert alias_views.task.apply((ref,)).get() == 1
    assert alias_views.task.apply((ref,)).get() == 1  # another message, the same key
    assert in_records("tasks", f"alias-task:{ref}")
    assert not IdempotencyRecord.objects.filter(key=f"alias-task:{ref}").exists()


def test_an_alias_that_is_not_configured_answers_a_problem(client_a: Client) -> None:
    """The alias is resolved at use: without "records", the view answers 503 and never
    runs; a function raises ImproperlyConfigured."""
    with override_settings(IDEMPOTENCY={"STORES": stores_setting(DB_STORE)}):
        response = post(client_a, "/decorated/", key=str(uuid.uuid4()))
        with pytest.raises(ImproperlyConfigured, match="has no store 'records'"):
            alias_views.function(uuid.uuid4().hex)
    assert response.status_code == 503
    assert json.loads(response.content)["code"] == "idempotency-store-misconfigured"
    assert alias_views.RUNS == {}


def test_a_class_or_a_dotted_path_is_refused_at_decoration() -> None:
    from idempotency import idempotent_function
    from idempotency.stores.database import DatabaseStore

    with pytest.raises(TypeError, match="an alias of IDEMPOTENCY\\['STORES'\\] or an instance"):
        idempotent_function(key="x:{ref}", store=DatabaseStore)  # type: ignore[arg-type]
    assert settings.IDEMPOTENCY["STORES"]["records"]["BACKEND"] == CACHE_STORE
