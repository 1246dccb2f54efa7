"""Fixtures of the beyond-HTTP tests (functions, tasks, submit tokens, locks)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from tests.beyond.support import Worker, broker_redis, unique, worker_env

DB_STORE = "idempotency.stores.DatabaseStore"
REDIS_STORE = "idempotency.stores.RedisStore"
CACHE_STORE = "idempotency.stores.CacheStore"


def store_params(*names: str) -> list[Any]:
    paths = {"db": DB_STORE, "redis": REDIS_STORE, "cache": CACHE_STORE}
    return [
        pytest.param(paths[name], id=name, marks=[pytest.mark.redis] if name == "redis" else [])
        for name in names
    ]


@pytest.fixture
def redis_client(settings: Any) -> Any:
    """The django-redis connection the library uses (``REDIS_URL``; tests marked redis)."""
    from django_redis import get_redis_connection

    return get_redis_connection("default")


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


@pytest.fixture
def eager_settings() -> Iterator[None]:
    with override_settings(IDEMPOTENCY={"STORE": DB_STORE}):
        yield
