"""Shared fixtures and the rules that decide where service-bound tests run.

Tests marked ``postgres`` need ``DATABASE_URL`` to point at PostgreSQL, tests
marked ``redis`` need ``REDIS_URL``. Without them they are skipped with the
reason, unless ``IDEMPOTENCY_TEST_REQUIRE_SERVICES=1`` (as in CI), where a
missing service fails the test instead of skipping it.

The slow tiers (``SLOW_TIERS``: real servers, chaos, clusters, browsers, Celery
workers, the docs) are left out of a plain run, which says so at its end; they run
with ``python3 dev.py test --all`` (``IDEMPOTENCY_TEST_ALL=1``, as in CI), with any
``-m`` expression, or when their test file is named on the command line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

REQUIRE_SERVICES = os.environ.get("IDEMPOTENCY_TEST_REQUIRE_SERVICES") == "1"
ALL_TIERS = os.environ.get("IDEMPOTENCY_TEST_ALL") == "1"

#: Markers of the tiers a plain run leaves out (they start processes or take seconds each).
SLOW_TIERS = ("browser", "celery_worker", "chaos", "cluster", "docs", "servers")

#: Tiers of whole files (or ``file::test``), marked here so the list is in one place.
TIER_OF = {
    "tests/core/test_client.py": "servers",
    "tests/core/test_server_storm.py": "servers",
    "tests/core/test_upload_memory.py": "servers",
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
}
SLOW_LEFT_OUT = pytest.StashKey[int]()

# the ``chromium`` fixture: a real headless browser
pytest_plugins = ["tests.chromium"]


@pytest.hookimpl(tryfirst=True)  # before -m selects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    for item in items:
        where = item.path.relative_to(root).as_posix()
        name = getattr(item, "originalname", item.name)
        tier = TIER_OF.get(f"{where}::{name}") or TIER_OF.get(where)
        if tier:
            item.add_marker(getattr(pytest.mark, tier))
    if ALL_TIERS or config.getoption("markexpr"):
        return
    named = {Path(arg.split("::")[0]).resolve() for arg in config.args}
    slow = [
        item
        for item in items
        if item.path not in named and any(item.get_closest_marker(m) for m in SLOW_TIERS)
    ]
    if slow:
        config.hook.pytest_deselected(items=slow)
        left = set(slow)
        items[:] = [item for item in items if item not in left]
        config.stash[SLOW_LEFT_OUT] = len(slow)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    left_out = config.stash.get(SLOW_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(
            f"{left_out} tests of the slow tiers ({', '.join(SLOW_TIERS)}) were not run: "
            "`python3 dev.py test --all` runs them too, as CI does "
            "(or -m <tier>, or name the test file)"
        )


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


def redis_url() -> str:
    return str(getattr(settings, "REDIS_URL", "") or "")


def _missing(reason: str) -> None:
    if REQUIRE_SERVICES:
        pytest.fail(f"required service missing: {reason}")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _service_markers(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("postgres") and not on_postgres():
        _missing("needs PostgreSQL: set DATABASE_URL=postgres://...")
    if request.node.get_closest_marker("redis") and not redis_url():
        _missing("needs Redis: set REDIS_URL=redis://...")


@pytest.fixture(autouse=True)
def _clear_caches() -> Iterator[None]:
    from django.core.cache import caches

    for alias in settings.CACHES:
        caches[alias].clear()
    yield
