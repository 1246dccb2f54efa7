"""Shared fixtures and the rules that decide where tests run.

The layout mirrors the package: ``tests/test_<module>.py`` tests ``idempotency/<module>.py``,
``tests/http/``, ``tests/stores/`` its subpackages; ``tests/contract/``
(the HTTP contract on every store, the interface matrix), ``tests/storms/`` (real
concurrency), ``tests/scale/`` (clusters, replicas, PgBouncer) and ``tests/docs/`` test the
whole rather than a module; ``tests/sample/`` mirrors the sample's apps. What tests share
lives in ``tests/support/`` (never imported from a test module or a conftest).

Tests marked ``server_db`` need ``DATABASE_URL`` to point at a server database
(PostgreSQL or MySQL/MariaDB: the concurrency tests), ``postgres`` and ``mysql`` at
that database (its own features), ``redis`` need ``REDIS_URL``. Without them they are
skipped with the reason, unless ``IDEMPOTENCY_TEST_REQUIRE_SERVICES=1`` (as in CI),
where a missing service fails the test instead of skipping it (``tests.support.services``).

The slow tiers (``SLOW_TIERS``: real servers, chaos, clusters, browsers, Celery
and Django task workers, the docs) are left out of a plain run, which says so at its end; they run
with ``python3 dev.py test --all`` (``IDEMPOTENCY_TEST_ALL=1``, as in CI), with any
``-m`` expression, or when their test file is named on the command line.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db.models import F
from django.test import Client, override_settings

from idempotency import signals
from idempotency.models import IdempotencyRecord
from tests.scale.servers import RedisClusterServer
from tests.support import log_leaks
from tests.support.clusters import REDIS_STORE, cluster_caches, start_cluster
from tests.support.counting import received, unique
from tests.support.records import MakeRecord, record
from tests.support.services import (
    broker_redis,
    missing,
    on_mysql,
    on_postgres,
    on_server_database,
    redis_url,
)
from tests.support.stores import (
    DB_STORE,
    STORE_VARIANTS,
    locks_using,
    tokens_using,
    using,
    variant_params,
)
from tests.support.users import logged_in_client, make_user
from tests.support.workers import Worker, worker_env
from tests.testapp import views
from tests.testapp.executions import ENV
from tests.testapp.models import Wallet

ALL_TIERS = os.environ.get("IDEMPOTENCY_TEST_ALL") == "1"

#: Markers of the tiers a plain run leaves out (they start processes or take seconds each).
SLOW_TIERS = (
    "browser",
    "celery_worker",
    "chaos",
    "cluster",
    "docs",
    "model",
    "servers",
    "task_worker",
)
#: Of those, the tiers that ``--all`` leaves out too: CI runs them in a step of their own
#: (``model``: the SPIN model checks, minutes of CPU and no service, ``.ci/model-tier``).
OWN_STEP_TIERS = ("model",)

#: Tiers of whole files (or ``file::test``), marked here so the list is in one place.
TIER_OF = {
    "tests/test_client_scripted_server.py": "servers",
    "tests/storms/test_server_storm.py": "servers",
    "tests/http/test_upload_memory.py": "servers",
    "tests/sample/test_client.py": "servers",
    "tests/sample/test_deploy_checks.py": "servers",
    "tests/sample/test_problems_everywhere.py::test_the_readmes_run_command_answers_problems_too": (
        "servers"
    ),
    "tests/sample/test_faults.py": "chaos",
    "tests/scale/test_failover.py": "cluster",
    "tests/scale/test_pgbouncer.py": "cluster",
    "tests/scale/test_redis_cluster.py": "cluster",
    "tests/docs/test_site.py": "docs",
    "tests/docs/test_snippets.py": "docs",
    "tests/model/test_spin.py": "model",
}

#: The tests that route to the test app's views (``tests/urls.py``), by folder or file;
#: the others keep the sample's URLs (``config/urls.py``) or name their own.
TESTAPP_URLS = (
    "tests/contract/",
    "tests/contrib/ninja/",
    "tests/http/",
    "tests/stores/",
    "tests/storms/",
    "tests/utils/test_outages.py",
    "tests/utils/test_outages_mariadb.py",
    "tests/core/test_job.py",
)
SLOW_LEFT_OUT = pytest.StashKey[int]()

# pytest-playwright's fixtures on Debian's Chromium, one Playwright per test
pytest_plugins = ["tests.support.browser"]


@pytest.hookimpl(tryfirst=True)  # before -m selects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    for item in items:
        where = item.path.relative_to(root).as_posix()
        name = getattr(item, "originalname", item.name)
        tier = TIER_OF.get(f"{where}::{name}") or TIER_OF.get(where)
        if tier:
            item.add_marker(getattr(pytest.mark, tier))
        if where.startswith(TESTAPP_URLS):
            item.add_marker(pytest.mark.urls("tests.urls"))
    if config.getoption("markexpr"):
        return
    named = {Path(arg.split("::")[0]).resolve() for arg in config.args}
    left_out = OWN_STEP_TIERS if ALL_TIERS else SLOW_TIERS
    slow = [
        item
        for item in items
        if item.path not in named and any(item.get_closest_marker(m) for m in left_out)
    ]
    if slow:
        config.hook.pytest_deselected(items=slow)
        left = set(slow)
        items[:] = [item for item in items if item not in left]
        config.stash[SLOW_LEFT_OUT] = len(slow)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # after the short summary: next to the totals
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> Iterator[None]:
    yield
    wanted = Counter(
        reason.removeprefix("Skipped: ").split(":")[0]
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple)
        for reason in [str(report.longrepr[2])]
        if reason.removeprefix("Skipped: ").startswith("needs ")
    )
    if wanted:
        terminalreporter.write_line(
            f"{sum(wanted.values())} tests were skipped for want of a service or tool ("
            + "; ".join(f"{count}: {why}" for why, count in sorted(wanted.items()))
            + "): docs/development.md says how to provide them (DATABASE_URL, REDIS_URL, ...)"
        )
    left_out = config.stash.get(SLOW_LEFT_OUT, 0)
    if left_out and ALL_TIERS:
        terminalreporter.write_line(
            f"{left_out} tests of the tiers CI runs in steps of their own "
            f"({', '.join(OWN_STEP_TIERS)}) were not run: -m <tier>, or name the test file"
        )
    elif left_out:
        terminalreporter.write_line(
            f"{left_out} tests of the slow tiers ({', '.join(SLOW_TIERS)}) were not run: "
            "`python3 dev.py test --all` runs them too, as CI does, but for "
            f"{', '.join(OWN_STEP_TIERS)} (or -m <tier>, or name the test file)"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test whose service is missing before any of its fixtures run: a module- or
    session-scoped fixture is set up before the test's own, and one that reaches for
    PostgreSQL must never run on SQLite (the README's tier touches no service it was not
    told about)."""
    # a test of one server database's own features is another tier's on the other one
    # (skipped even where services are required); on SQLite it is a missing service
    if item.get_closest_marker("postgres") and not on_postgres():
        if on_server_database():
            pytest.skip("tests PostgreSQL's own features; this run is on MySQL/MariaDB")
        missing("needs PostgreSQL: set DATABASE_URL=postgres://...")
    if item.get_closest_marker("mysql") and not on_mysql():
        if on_server_database():
            pytest.skip("tests MySQL's own features; this run is on PostgreSQL")
        missing("needs MySQL or MariaDB: set DATABASE_URL=mysql://...")
    if item.get_closest_marker("server_db") and not on_server_database():
        missing("needs a server database: set DATABASE_URL=postgres://... or mysql://...")
    if item.get_closest_marker("redis") and not redis_url():
        missing("needs Redis: set REDIS_URL=redis://...")


@pytest.fixture(autouse=True)
def _clear_caches() -> Iterator[None]:
    from django.core.cache import caches

    for alias in settings.CACHES:
        caches[alias].clear()
    yield


@pytest.fixture(autouse=True)
def _no_raw_keys_in_logs() -> Iterator[None]:
    """Issue 36, finding 11: no log record of the library carries a raw key or scope
    that this test used (``tests/support/log_leaks.py``)."""
    watch = log_leaks.install()
    watch.reset()
    yield
    leaks = watch.reset()
    if leaks:
        pytest.fail("raw keys or scopes in the library's logs:\n" + "\n".join(leaks[:5]))


@pytest.fixture(autouse=True)
def _process_state() -> Iterator[None]:
    """What one test leaves in the process's globals, the next one does not inherit:
    the burst log's memory (a failure logged once a minute would go unlogged in the next
    test), and Celery's "a join would block" flag (``Task.apply`` sets it and restores
    what it saw, so threads applying tasks at once can leave it set, and every later
    ``.get()`` of an eager result would raise)."""
    from celery.result import _set_task_join_will_block

    from idempotency.stores.database import reset_purge_counter
    from idempotency.utils.outages import bursts

    bursts.reset()
    reset_purge_counter()
    yield
    _set_task_join_will_block(False)


# -- users, clients, the test app's wallet -----------------------------------------------


@pytest.fixture
def user(db: Any) -> Any:
    return make_user("alice")


@pytest.fixture
def other_user(db: Any) -> Any:
    return make_user("bob")


@pytest.fixture
def client_a(user: Any) -> Client:
    return logged_in_client(user)


@pytest.fixture
def client_b(other_user: Any) -> Client:
    return logged_in_client(other_user)


@pytest.fixture
def wallet(db: Any) -> Wallet:
    return Wallet.objects.create(pk=1, balance=1000)


# -- stores, records, executions, time -----------------------------------------------------


@pytest.fixture(params=variant_params())
def store_variant(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each store and mode of ``STORE_VARIANTS`` in turn, as the ``IDEMPOTENCY`` setting."""
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[request.param]):
        yield request.param


@pytest.fixture
def eager_settings() -> Iterator[None]:
    with override_settings(IDEMPOTENCY={**using(DB_STORE)}):
        yield


@pytest.fixture
def make_record(db: None) -> MakeRecord:
    """Save one record (see :func:`tests.support.records.record` for the arguments)."""

    def make(**kwargs: Any) -> IdempotencyRecord:
        obj = record(**kwargs)
        obj.save()
        return obj

    return make


@pytest.fixture
def execution_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The file each view body appends its Idempotency-Key to (see tests.testapp.executions)."""
    path = tmp_path / "executions.log"
    monkeypatch.setenv(ENV, str(path))
    yield path


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[views.Gate]:
    """A fresh gate for ``?hold=1`` bodies; released at the end so no body is left waiting."""
    fresh = views.Gate()
    monkeypatch.setattr(views, "HOLD", fresh)
    yield fresh
    fresh.release.set()


@pytest.fixture
def age_records() -> Callable[[str, float], None]:
    """The database store's clock, moved on for one key: ``age_records(key, seconds)`` moves
    its records' creation, lease and expiry ``seconds`` into the past, as if that much time
    had passed (on the application's clock and PostgreSQL's alike), without a sleep."""

    def age(key: str, seconds: float) -> None:
        delta = timedelta(seconds=seconds)
        IdempotencyRecord.objects.filter(key=key).update(
            created_at=F("created_at") - delta,
            expires_at=F("expires_at") - delta,
            lease_expires_at=F("lease_expires_at") - delta,
        )

    return age


@pytest.fixture
def outages() -> Iterator[list[dict[str, Any]]]:
    """The ``store_unavailable`` signals sent during the test."""
    with received(signals.store_unavailable) as seen:
        yield seen


# -- Redis, a Redis Cluster, Celery workers ----------------------------------------------


@pytest.fixture
def redis_client(settings: Any) -> Any:
    """The django-redis connection the library uses (``REDIS_URL``; tests marked redis)."""
    from idempotency.utils.redis_clients import RedisConnector

    return RedisConnector(cache="default").client


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterServer]:
    """A private Redis Cluster (3 primaries, 3 replicas) for the session."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture
def on_cluster(redis_cluster: RedisClusterServer) -> Iterator[RedisClusterServer]:
    """RedisStore, Redis tokens and Redis locks on the cluster (the cache ``"cluster"``)."""
    redis_cluster.flush()
    with override_settings(
        CACHES=cluster_caches(redis_cluster),
        IDEMPOTENCY={
            **using(REDIS_STORE, cache="cluster"),
            "MODE": "lease",
            **tokens_using("redis", cache="cluster"),
            **locks_using("redis", cache="cluster"),
        },
    ):
        yield redis_cluster


@pytest.fixture
def counters() -> Any:
    """The broker database's Redis, where worker tasks count their side effects."""
    return broker_redis()


@pytest.fixture
def start_worker(
    transactional_db: None, tmp_path: Path, counters: Any
) -> Iterator[Callable[..., Worker]]:
    """Start ``celery worker --pool=solo`` processes on the test database; stopped at teardown.

    ``transactional_db`` comes first so the workers are gone before the database is
    flushed at the end of the test.
    """
    workers: list[Worker] = []

    def start(queue: str | None = None, **extra_env: str) -> Worker:
        queue = queue or unique("beyond-q")
        env = worker_env(queue)
        env.update(extra_env)
        worker = Worker(queue=queue, env=env, log=tmp_path / f"worker-{len(workers)}.log")
        workers.append(worker)
        return worker.start()

    yield start
    for worker in workers:
        worker.stop()
    for queue in {worker.queue for worker in workers}:
        # the queue's list and kombu's binding set stay in the broker database otherwise
        for name in counters.scan_iter(match=f"*{queue}*"):
            counters.delete(name)
