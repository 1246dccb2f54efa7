"""Shared fixtures and the rules that decide where service-bound tests run.

Tests marked ``postgres`` need ``DATABASE_URL`` to point at PostgreSQL, tests
marked ``redis`` need ``REDIS_URL``. Without them they are skipped with the
reason, unless ``IDEMPOTENCY_TEST_REQUIRE_SERVICES=1`` (as in CI), where a
missing service fails the test instead of skipping it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.db import connection

REQUIRE_SERVICES = os.environ.get("IDEMPOTENCY_TEST_REQUIRE_SERVICES") == "1"

# the ``chromium`` fixture: a real headless browser
pytest_plugins = ["tests.chromium"]


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
