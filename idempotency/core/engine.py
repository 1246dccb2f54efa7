"""The engine: one keyed run, for views, functions and tasks alike.

:func:`run` (sync) and :func:`arun` (async) take the first look at the key, replay a
completed record at once, and otherwise hand the run to its mode, which goes on from
what that look found: claim or wait for the owner, or answer; run the work; complete
the record or release it; store the error the interface keeps. Every step calls the
store's own method (``store.claim``, ``await store.aclaim``); everything that differs
between interfaces (how a caller is answered) comes from the
:class:`~idempotency.core.job.Adapter`.

**Lease mode** (any store, :mod:`~idempotency.core.lease`): claim the key (a record
with a lease and a fencing token) or wait for its owner; run the work while a
keep-alive renews the lease; complete the record with the outcome, or release it,
proven by the token.

**Atomic mode** (an :class:`~idempotency.stores.atomic.AtomicStore`, sync only,
:mod:`~idempotency.core.atomic`): claim the key inside a transaction with the work's
own writes and store the outcome in it, so they commit together; a released outcome
rolls back claim and writes alike. With ``optimistic``, the work runs first and the
completed record is inserted last.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from idempotency.core.atomic import rolled_back, run_atomic
from idempotency.core.job import Adapter, Job
from idempotency.core.lease import arun_lease, give_back, run_lease
from idempotency.core.steps import afirst_look, first_look, replay
from idempotency.stores.atomic import AtomicStore
from idempotency.stores.base import Claim, ClaimStatus

COMPLETED = ClaimStatus.COMPLETED


def run(job: Job, adapter: Adapter, work: Callable[[], Any]) -> Any:
    """Run ``work`` under ``job``'s key; the caller's answer."""
    state = first_look(job)
    if state is not None and state.status is COMPLETED:
        return replay(job, adapter, state)
    if job.mode == "atomic":
        return run_atomic(job, adapter, work, state)
    return run_lease(job, adapter, work, state)


async def arun(job: Job, adapter: Adapter, work: Callable[[], Awaitable[Any]]) -> Any:
    """:func:`run` for async work (lease mode): the store's async methods are awaited
    (``aclaim``, ``acomplete``, ...), the work and the pauses run on the event loop."""
    state = await afirst_look(job)
    if state is not None and state.status is COMPLETED:
        return replay(job, adapter, state)
    return await arun_lease(job, adapter, work, state)


def release(job: Job, claim: Claim, reason: BaseException | None = None) -> None:
    """Give ``job``'s key back now, while its work runs (a task's ``retry()``): nothing
    is stored when the work ends."""
    job.finished = True
    if job.mode == "atomic":
        assert isinstance(job.store, AtomicStore)
        job.store.roll_back(job.databases)
        rolled_back(job, exception=reason)
        return
    give_back(job, claim, exception=reason)


__all__ = ["arun", "release", "run"]
