"""Fixtures of the multi-node tests: PgBouncer, their URLs, their execution log.

PgBouncer is started on free loopback ports by ``pgbouncer_factory`` and stopped after
the test; the Redis Cluster fixtures (``redis_cluster``, ``on_cluster``) are the root
conftest's, since the store contract runs on the cluster too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.scale import views
from tests.scale.servers import PgBouncerServer
from tests.support.services import missing


@pytest.fixture(autouse=True)
def _scale_urls(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.scale.urls"


@pytest.fixture
def execution_log(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "executions.log"
    views.EXECUTIONS["path"] = str(path)
    yield path
    views.EXECUTIONS["path"] = ""


@pytest.fixture
def pgbouncer_factory() -> Iterator[Any]:
    """Start PgBouncers (transaction pooling) in front of the test PostgreSQL server."""
    from django.db import connection

    if connection.vendor != "postgresql":
        missing("needs PostgreSQL: set DATABASE_URL=postgres://...")
    if not PgBouncerServer.available():
        missing("needs pgbouncer (apt-get install pgbouncer)")
    started: list[PgBouncerServer] = []

    def start(pool_size: int = 10) -> PgBouncerServer:
        params = connection.settings_dict
        bouncer = PgBouncerServer(
            pg_host=params["HOST"] or "127.0.0.1",
            pg_port=int(params["PORT"] or 5432),
            pg_user=params["USER"] or "postgres",
            pool_size=pool_size,
        ).start()
        started.append(bouncer)
        return bouncer

    yield start
    for bouncer in started:
        bouncer.stop()
