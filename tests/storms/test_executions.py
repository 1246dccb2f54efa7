"""One execution per key, counted where no rollback can undo it, on PostgreSQL.

Every store × mode × interface takes storms of concurrent duplicates (20 threads,
released together, several rounds with a fresh key each). Each view body appends
its key to an ``O_APPEND`` file when it *starts*, so a body that ran and then
rolled back (as duplicates do under an insert-last claim) is still counted. The
promise: exactly one execution per key, and no 5xx.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

from idempotency import idempotent_function
from tests.support.services import on_mysql, redis_url
from tests.support.stores import STORE_VARIANTS, store_of
from tests.support.storms import run_threads, storm
from tests.support.users import logged_in_client
from tests.testapp.executions import executions
from tests.testapp.models import Wallet

pytestmark = [pytest.mark.server_db, pytest.mark.django_db(transaction=True)]

DUPLICATES = 20
ROUNDS = 3
MIDDLEWARE = "idempotency.IdempotencyMiddleware"

#: interface -> (url, body); the middleware cells run with the middleware installed
INTERFACES: dict[str, tuple[str, dict[str, Any]]] = {
    "decorator-function": ("/t/function/", {"amount": 1}),
    "decorator-apiview": ("/t/api/", {"amount": 1}),
    "decorator-django-cbv": ("/t/django-cbv/", {"amount": 1}),
    "decorator-api-view": ("/t/api-view/", {"amount": 1}),
    "decorator-async": ("/t/async/", {"amount": 1}),
    "mixin-viewset": ("/t/viewset/", {"label": "x", "amount": 1}),
    "middleware-function": ("/t/plain/", {"amount": 1}),
    "middleware-apiview": ("/t/plain-api/", {"amount": 1}),
}


def fire(user: Any, url: str, key: str, body: dict[str, Any], n: int) -> list[Any]:
    """``n`` identical requests of ``user`` with one key, released together."""
    return storm(lambda: logged_in_client(user), url, key, body, n)


def assert_one_execution_per_key(
    responses_by_key: dict[str, list[Any]], log: Path, *, cell: str
) -> None:
    ran = executions(log)
    for key, responses in responses_by_key.items():
        statuses = Counter(r.status_code for r in responses)
        assert ran[key] == 1, f"{cell}: the view body ran {ran[key]} times for one key {statuses}"
        assert not [s for s in statuses if s >= 500], f"{cell}: 5xx in {statuses}"
        assert set(statuses) <= {201, 409}, f"{cell}: {statuses}"
        created = [r for r in responses if r.status_code == 201]
        first = [r for r in created if "Idempotent-Replayed" not in r]
        assert len(first) == 1, f"{cell}: {len(first)} first answers"
        assert all(r.content == first[0].content for r in created), f"{cell}: replay differs"
        assert all(r["Retry-After"] for r in responses if r.status_code == 409)


@pytest.mark.parametrize("interface", list(INTERFACES))
@pytest.mark.parametrize(
    "variant",
    [
        "db-atomic",
        "db-lease",
        "db-cached",
        pytest.param("redis", marks=pytest.mark.redis),
        "cache",
    ],
)
def test_concurrent_duplicates_run_the_view_body_once(
    user: Any, wallet: Wallet, execution_log: Path, variant: str, interface: str
) -> None:
    url, body = INTERFACES[interface]
    middleware = [*settings.MIDDLEWARE, MIDDLEWARE] if interface.startswith("middleware") else None
    overrides: dict[str, Any] = {"IDEMPOTENCY": STORE_VARIANTS[variant]}
    if middleware:
        overrides["MIDDLEWARE"] = middleware
    responses: dict[str, list[Any]] = {}
    with override_settings(**overrides):
        for _round in range(ROUNDS):
            key = str(uuid.uuid4())
            responses[key] = fire(user, url + "?sleep=0.05", key, body, DUPLICATES)
    assert_one_execution_per_key(responses, execution_log, cell=f"{variant} × {interface}")
    assert Wallet.objects.get().balance == 1000 - ROUNDS


#: RedisStore built three ways (issue 44): from a URL, from Django's own RedisCache's
#: settings, from django-redis' settings (the alias "storm" of the CACHES below)
REDIS_SOURCES = {
    "url": lambda url: {"LOCATION": url},
    "builtin": lambda url: {"OPTIONS": {"cache": "storm"}},
    "django-redis": lambda url: {"OPTIONS": {"cache": "storm"}},
}
CACHE_BACKENDS = {
    "builtin": "django.core.cache.backends.redis.RedisCache",
    "django-redis": "django_redis.cache.RedisCache",
}


@pytest.mark.redis
@pytest.mark.parametrize("interface", ["decorator-function", "decorator-async"])
@pytest.mark.parametrize("source", list(REDIS_SOURCES))
def test_redis_store_from_each_source_runs_the_view_body_once(
    user: Any, wallet: Wallet, execution_log: Path, source: str, interface: str
) -> None:
    """The storm on RedisStore whether its LOCATION is a URL or it reuses a cache's
    settings (Django's RedisCache or django-redis): one execution per key on each."""
    if settings.CACHES["default"].get("OPTIONS", {}).get("CONNECTION_FACTORY"):
        # the Cluster tier: these sources name one server; the other storms of this
        # module run RedisStore on the cluster there
        pytest.skip("three single-server sources; the Cluster tier runs the cluster's storms")
    url = redis_url()
    caches = {**settings.CACHES}
    if source in CACHE_BACKENDS:
        caches["storm"] = {"BACKEND": CACHE_BACKENDS[source], "LOCATION": url}
    store = {"BACKEND": "idempotency.stores.redis.RedisStore", **REDIS_SOURCES[source](url)}
    config = {"STORES": {"default": store}, "MODE": "lease"}
    path, body = INTERFACES[interface]
    responses: dict[str, list[Any]] = {}
    with override_settings(CACHES=caches, IDEMPOTENCY=config):
        for _round in range(ROUNDS):
            key = str(uuid.uuid4())
            responses[key] = fire(user, path + "?sleep=0.05", key, body, DUPLICATES)
    assert_one_execution_per_key(responses, execution_log, cell=f"redis-{source} × {interface}")
    assert Wallet.objects.get().balance == 1000 - ROUNDS


def test_optimistic_claim_is_the_documented_exception(
    user: Any, wallet: Wallet, execution_log: Path
) -> None:
    """``ATOMIC_CLAIM="optimistic"`` keeps the database effect single but may run the body
    for every duplicate that arrives before the first commits: why it is opt-in only.
    Whatever the count, the money is right and no caller sees a 5xx."""
    config = {**STORE_VARIANTS["db-atomic"], "ATOMIC_CLAIM": "optimistic"}
    responses: dict[str, list[Any]] = {}
    with override_settings(IDEMPOTENCY=config):
        for _round in range(ROUNDS):
            key = str(uuid.uuid4())
            responses[key] = fire(user, "/t/api/?sleep=0.05", key, {"amount": 1}, DUPLICATES)
    ran = executions(execution_log)
    for key, answers in responses.items():
        assert ran[key] >= 1
        assert {r.status_code for r in answers} == {201}
    print("optimistic executions per key:", [ran[key] for key in responses])
    # the counter sees what committed rows cannot: bodies that ran and rolled back
    assert sum(ran[key] for key in responses) > ROUNDS
    assert Wallet.objects.get().balance == 1000 - ROUNDS


@pytest.mark.parametrize(
    ("store", "mode"),
    [
        ("idempotency.stores.database.DatabaseStore", "lease"),
        ("idempotency.stores.database.DatabaseStore", "atomic"),
        pytest.param("idempotency.stores.redis.RedisStore", "lease", marks=pytest.mark.redis),
        ("idempotency.stores.cache.CacheStore", "lease"),
    ],
    ids=["db-lease", "db-atomic", "redis", "cache"],
)
def test_concurrent_calls_of_an_idempotent_function_run_its_body_once(
    execution_log: Path, store: str, mode: str
) -> None:
    from tests.testapp.executions import record_execution

    @idempotent_function(key="charge:{ref}", store=store_of(store), mode=mode, wait=30)
    def charge(ref: str) -> dict[str, str]:
        record_execution(ref)
        with connection.cursor() as cursor:  # a body that takes the database's time
            cursor.execute("SELECT SLEEP(0.05)" if on_mysql() else "SELECT pg_sleep(0.05)")
        return {"charged": ref}

    refs = [str(uuid.uuid4()) for _ in range(ROUNDS)]
    for ref in refs:
        results = run_threads(DUPLICATES, lambda _i, ref=ref: charge(ref))  # type: ignore[misc]
        assert results == [{"charged": ref}] * DUPLICATES
    ran = executions(execution_log)
    assert [ran[ref] for ref in refs] == [1] * ROUNDS
