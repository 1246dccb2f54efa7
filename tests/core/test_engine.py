"""The engine on its own (idempotency/core): one flow, a sync and an async driver, any
interface. A minimal adapter stands for HTTP, functions and tasks; duplicates fired at
once (threads for the sync driver, tasks on one event loop for the async one) run the
work once on each real store, and every caller gets the first run's answer."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import Counter
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from idempotency.core import engine
from idempotency.core.job import Job, Outcome
from idempotency.stores.base import ClaimStatus, KeyState, StoredResponse, get_store
from tests.support.stores import DB_STORE, store_of, store_params
from tests.support.storms import Overlap

DUPLICATES = 12


class Answers:
    """An interface that answers with the stored bytes, and says "busy" or "other"."""

    def adopts(self, job: Job, claim: KeyState) -> bool:
        return False

    def replay(self, job: Job, claim: KeyState) -> Any:
        assert claim.response is not None
        return ("replayed", claim.response.body.decode())

    def refuse(self, job: Job, claim: KeyState) -> Any:
        return ("other" if claim.status is ClaimStatus.MISMATCH else "busy", None)

    def over_quota(self, job: Job, retry_after: float) -> Any:
        return ("quota", retry_after)

    def bind(self, job: Job, claim: KeyState | None) -> None:
        return None

    def keep(self, job: Job, result: str) -> Outcome:
        return Outcome(StoredResponse(200, [], result.encode()), ("ran", result), job.ttl)

    def failure(self, job: Job, exc: BaseException) -> Outcome | None:
        return None

    async def akeep(self, job: Job, result: str) -> Outcome:
        return self.keep(job, result)

    async def afailure(self, job: Job, exc: BaseException) -> Outcome | None:
        return self.failure(job, exc)


def job_for(store: Any, key: str, *, wait: float = 10.0, fingerprint: str = "f") -> Job:
    return Job(
        store=store,
        scope="engine",
        key=key,
        fingerprint=fingerprint,
        mode="lease",
        lease=30.0,
        ttl=60.0,
        wait=wait,
        method="TEST",
        route="engine",
        owner="engine",
        interface="function",
    )


#: The database store on a server database: SQLite's writers in threads meet "database
#: table is locked" (it serialises writers; the storms of the repository are PostgreSQL's).
SERVER_DB = pytest.param(store_of(DB_STORE), id="db", marks=pytest.mark.server_db)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", [SERVER_DB, *store_params("redis", "cache")])
def test_threads_through_the_sync_driver_run_the_work_once(store: str) -> None:
    resolved, key = get_store(store), f"threads-{uuid.uuid4().hex}"
    runs: Counter[str] = Counter()
    go = threading.Barrier(DUPLICATES)
    overlap = Overlap(DUPLICATES)
    answers: list[Any] = []

    def work() -> str:
        runs[key] += 1
        overlap.hold()  # the others meet the claim while this one runs
        return "result"

    def caller() -> None:
        go.wait(10)
        answers.append(overlap.call(engine.run, job_for(resolved, key), Answers(), work))

    threads = [threading.Thread(target=caller) for _ in range(DUPLICATES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert runs[key] == 1
    assert sorted(answers) == [("ran", "result")] + [("replayed", "result")] * (DUPLICATES - 1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", store_params("redis", "db"))
def test_tasks_on_one_loop_through_the_async_driver_run_the_work_once(store: str) -> None:
    resolved, key = get_store(store), f"tasks-{uuid.uuid4().hex}"
    runs: Counter[str] = Counter()

    overlap = Overlap(DUPLICATES)

    async def work() -> str:
        runs[key] += 1
        await overlap.ahold()  # the others meet the claim while this one runs
        return "result"

    async def call() -> Any:
        overlap.enter()
        return await engine.arun(job_for(resolved, key), Answers(), work)

    async def storm() -> list[Any]:
        calls = [call() for _ in range(DUPLICATES)]
        try:
            return list(await asyncio.gather(*calls))
        finally:  # the connection of the thread DatabaseStore's async calls ran in
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    answers = asyncio.run(storm())
    assert runs[key] == 1
    assert sorted(answers) == [("ran", "result")] + [("replayed", "result")] * (DUPLICATES - 1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", store_params("db", "redis"))
def test_one_flow_answers_alike_in_both_drivers(store: str) -> None:
    """The same steps, sync or async: a first run, a replay, another request's key, a
    key in progress with no wait, and a released key running again."""
    resolved = get_store(store)
    key, held = f"alike-{uuid.uuid4().hex}", f"held-{uuid.uuid4().hex}"

    def sync(job: Job, result: str = "one") -> Any:
        return engine.run(job, Answers(), lambda: result)

    def run_async(job: Job, result: str = "one") -> Any:
        async def work() -> str:
            return result

        async def once() -> Any:
            try:
                return await engine.arun(job, Answers(), work)
            finally:
                await sync_to_async(connections.close_all, thread_sensitive=True)()

        return asyncio.run(once())

    for drive, suffix in ((sync, "s"), (run_async, "a")):
        assert drive(job_for(resolved, key + suffix)) == ("ran", "one")
        assert drive(job_for(resolved, key + suffix), "two") == ("replayed", "one")
        other = job_for(resolved, key + suffix, fingerprint="g")
        assert drive(other) == ("other", None)
        claim = resolved.claim(
            "engine", held + suffix, fingerprint="f", lease=30, ttl=60, method="", route=""
        )
        assert claim.owned
        assert drive(job_for(resolved, held + suffix, wait=0)) == ("busy", None)
        assert resolved.release("engine", held + suffix, fence=claim.fence)
        assert drive(job_for(resolved, held + suffix, wait=0), "three") == ("ran", "three")
