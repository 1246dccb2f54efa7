"""The engine: one keyed run, for views, functions and tasks alike.

:func:`run` (sync) and :func:`arun` (async) drive one flow, written once. The flow is a
generator (:func:`flow`) that yields the steps that do I/O (a store call, the work, a
pause) and gets their results back, so the sync driver calls ``store.claim`` and the
async one awaits ``store.aclaim``, with no thread in between where the store is
natively async. Everything that differs between interfaces (how a caller is answered)
comes from the :class:`~idempotency.core.job.Adapter`.

**Lease mode** (any store): claim the key (a record with a lease and a fencing token)
or wait for its owner; run the work while a keep-alive renews the lease; complete the
record with the outcome, or release it, proven by the token.

**Atomic mode** (an :class:`~idempotency.stores.base.AtomicStore`, sync only): claim
the key inside a transaction with the work's own writes and store the outcome in it, so
they commit together; a released outcome rolls back claim and writes alike. With
``optimistic``, the work runs first and the completed record is inserted last.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any

from idempotency.conf import idempotency_settings
from idempotency.core.atomic import atomic_flow, rolled_back
from idempotency.core.job import Adapter, Job
from idempotency.core.lease import give_back, lease_flow
from idempotency.core.steps import ADAPT, LOOK, STORE, WORK, Flow, Step, first_step
from idempotency.observability.tracing import spanned
from idempotency.stores.base import AtomicStore, Claim, ClaimStatus

COMPLETED = ClaimStatus.COMPLETED


def flow(job: Job, adapter: Adapter, first: Any = LOOK) -> Flow:
    """The whole run: the caller's answer is the generator's return value. ``first``:
    the state the run's first look (:func:`first_step`) found, where the driver took it
    itself; else the flow yields that step first."""
    # the mode's own generator, not one that delegates to it: every step would cross
    # one generator frame more
    if job.mode == "atomic":
        return atomic_flow(job, adapter, first)
    return lease_flow(job, adapter, first)


def release(job: Job, claim: Claim, reason: BaseException | None = None) -> None:
    """Give ``job``'s key back now, while its work runs (a task's ``retry()``): nothing
    is stored when the work ends."""
    job.finished = True
    if job.mode == "atomic":
        assert isinstance(job.store, AtomicStore)
        job.store.roll_back(job.databases)
        rolled_back(job, exception=reason)
        return
    drive(give_back(job, claim, exception=reason), job, lambda: None)


def _timed(job: Job, span: str, method: Callable[..., Any], step: Step, traced: bool) -> Any:
    """A store step in its span (when tracing is on); a claim's seconds added up."""
    started = perf_counter()
    try:
        if not traced:
            return method(*step[3], **step[4])
        with spanned(span, job, step[2]) as done:
            return done(method(*step[3], **step[4]))
    finally:
        if span == "claim":
            job.claim_seconds = (job.claim_seconds or 0.0) + perf_counter() - started


def drive(steps: Flow, job: Job, work: Callable[[], Any], adapter: Adapter | None = None) -> Any:
    """Run ``steps`` to their end, doing each step in this thread."""
    # read once per run: the loop below is the hot path of every keyed request
    traced = idempotency_settings.OPENTELEMETRY
    store = job.store
    send = steps.send
    try:
        step = send(None)
        while True:
            kind = step[0]
            try:
                if kind is STORE:
                    span = step[1]
                    method = getattr(store, step[2])
                    if span == "claim" or (traced and span is not None):
                        value = _timed(job, span, method, step, traced)
                    else:
                        value = method(*step[3], **step[4])
                elif kind is WORK:
                    job.started = True
                    value = work()
                elif kind is ADAPT:
                    method = getattr(adapter, step[1])
                    value = _replayed(job, method, step) if traced else method(*step[2])
                else:
                    time.sleep(step[1])
                    value = None
            except BaseException as exc:  # handed to the flow, which re-raises what it must
                step = steps.throw(exc)
                continue
            step = send(value)
    except StopIteration as stop:  # only send() and throw() raise it: the flow's end
        return stop.value


def _replayed(job: Job, replay: Callable[..., Any], step: Step) -> Any:
    """An adapter's step, ``replay`` in its span (tracing on)."""
    if step[1] != "replay":
        return replay(*step[2])
    with spanned("replay", job, "replay") as done:
        return done(replay(*step[2]))


def run(job: Job, adapter: Adapter, work: Callable[[], Any]) -> Any:
    """Run ``work`` under ``job``'s key; the caller's answer.

    The first look (a claim, or a look-up) is taken here, not by the flow: a completed
    record is then replayed without a generator or the driver's loop (every replay),
    and any other state is handed to the flow, which goes on from it."""
    traced = idempotency_settings.OPENTELEMETRY
    step = first_step(job)
    method = getattr(job.store, step[2])
    if traced:
        state = _timed(job, "claim", method, step, traced)
    else:
        started = perf_counter()
        try:
            state = method(*step[3], **step[4])
        finally:
            job.claim_seconds = perf_counter() - started
    if state is not None and state.status is COMPLETED:
        if traced:
            return _replayed(job, adapter.replay, (ADAPT, "replay", (job, state)))
        return adapter.replay(job, state)
    return drive(flow(job, adapter, state), job, work, adapter)


async def arun(job: Job, adapter: Adapter, work: Callable[[], Awaitable[Any]]) -> Any:
    """:func:`run` for async work (lease mode): the store's async methods are awaited
    (``aclaim``, ``acomplete``, ...), the work and the pauses run on the event loop. The
    first look is taken here too: a completed record is replayed without the flow."""
    traced = idempotency_settings.OPENTELEMETRY
    store = job.store
    step = first_step(job)
    state = await _atimed(job, "claim", getattr(store, "a" + step[2]), step, traced)
    if state is not None and state.status is COMPLETED:
        return await _adapted(job, adapter, (ADAPT, "replay", (job, state)), traced)
    steps = flow(job, adapter, state)
    send = steps.send
    try:
        step = send(None)
        while True:
            kind = step[0]
            try:
                if kind is STORE:
                    span = step[1]
                    method = getattr(store, "a" + step[2])
                    if span == "claim" or (traced and span is not None):
                        value = await _atimed(job, span, method, step, traced)
                    else:
                        value = await method(*step[3], **step[4])
                elif kind is WORK:
                    job.started = True
                    value = await work()
                elif kind is ADAPT:
                    value = await _adapted(job, adapter, step, traced)
                else:
                    await asyncio.sleep(step[1])
                    value = None
            except BaseException as exc:  # handed to the flow, which re-raises what it must
                step = steps.throw(exc)
                continue
            step = send(value)
    except StopIteration as stop:  # only send() and throw() raise it: the flow's end
        return stop.value


async def _adapted(job: Job, adapter: Adapter, step: Step, traced: bool) -> Any:
    """An adapter's step: its async twin (``akeep``, ...) where it has one."""
    twin = getattr(adapter, "a" + step[1], None)
    if twin is not None:
        return await twin(*step[2])
    method = getattr(adapter, step[1])
    return _replayed(job, method, step) if traced else method(*step[2])


async def _atimed(
    job: Job, span: str, method: Callable[..., Awaitable[Any]], step: Step, traced: bool
) -> Any:
    """:func:`_timed` for the store's async twin ``method``."""
    started = perf_counter()
    try:
        if not traced:
            return await method(*step[3], **step[4])
        with spanned(span, job, step[2]) as done:
            return done(await method(*step[3], **step[4]))
    finally:
        if span == "claim":
            job.claim_seconds = (job.claim_seconds or 0.0) + perf_counter() - started


__all__ = ["arun", "drive", "flow", "release", "run"]
