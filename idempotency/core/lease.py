"""Lease mode (any store): claim the key with a lease and a fencing token, or wait for
its owner; run the work while a keep-alive renews the lease; complete the record with
the outcome, or release it, proven by the token.

:func:`run_lease` and its async twin :func:`arun_lease` read the same way, step for
step; what they decide between store calls is in plain functions both call
(:func:`completed`, :func:`released`, :func:`unstored`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from idempotency import signals
from idempotency.core.backoff import Backoff
from idempotency.core.job import Adapter, Job, Outcome, logger
from idempotency.core.keepalive import kept_alive
from idempotency.core.steps import (
    acomplete,
    answer,
    aover_quota,
    asettle,
    complete,
    over_quota,
    settle,
    step,
    unsettled,
)
from idempotency.exceptions import StoreUnavailable
from idempotency.stores.base import Claim, ClaimStatus

#: A completion the store could not take is sent again after these pauses (seconds),
#: growing, until the lease runs out.
RETRY_FIRST_PAUSE = 0.05
RETRY_LONGEST_PAUSE = 1.0

CLAIMED = ClaimStatus.CLAIMED


# -- what both runs decide -----------------------------------------------------------


def completed(job: Job, claim: Claim, outcome: Outcome, done: bool) -> None:
    """The completion was sent: ``done``, or refused (a stale owner)."""
    if done:
        job.send(signals.stored, status=outcome.status)
    else:
        job.stale(claim, "completion")


def released(job: Job, claim: Claim, done: bool, extra: dict[str, Any]) -> None:
    """The release was sent: ``done`` (signalled with ``extra``), or refused."""
    if done:
        job.send(signals.released, **extra)
    else:
        job.stale(claim, "release")


def unstored(job: Job) -> None:
    """The store was unreachable for the whole lease: the work ran, its caller gets its
    outcome; the claim ends with its lease, and a repeat after that runs the work again
    (its effects need their own unique keys)."""
    logger.warning(
        "idempotency: %s ran but its outcome could not be stored (store unreachable "
        "for a whole lease, %.1f s); a repeat after the lease runs it again",
        job.ref,
        job.lease,
    )


def retries(job: Job) -> Backoff:
    """The pauses between the sends of a completion the store could not take: growing,
    for as long as the lease lasts. Until it runs out no retry can take the key over,
    and the completion is fenced, so a store that comes back within the lease keeps the
    outcome (the work never runs twice); a completion whose first send did land answers
    as it did (its resend recognises its own token)."""
    return Backoff(job.lease, first=RETRY_FIRST_PAUSE, cap=RETRY_LONGEST_PAUSE, jitter=True)


# -- sync ------------------------------------------------------------------------------


def run_lease(job: Job, adapter: Adapter, work: Callable[[], Any], state: Claim | None) -> Any:
    """Own the key or answer from its record (``state``: what the first look found);
    over ``MAX_NEW_RECORDS``, give it back; run the work under keep-alive; keep its
    outcome, or release the key."""
    if unsettled(state):  # a claim taken or a completed record needs no settling
        state = settle(job, adapter, state, claims=True)
    assert state is not None
    if state.status is not CLAIMED:
        return answer(job, adapter, state)
    claim = state
    if job.quota is not None and not claim.taken_over:
        try:
            refused = over_quota(job, adapter)
        except BaseException:
            give_back(job, claim)
            raise
        if refused is not None:
            give_back(job, claim, status=429)
            return refused
    adapter.bind(job, claim)
    try:
        with kept_alive(
            job.store, job.scope, job.key, fence=claim.fence, lease=job.lease, owner=job.owner
        ):
            job.started = True
            result = work()
    except BaseException as exc:
        return _failed(job, adapter, claim, exc)
    if job.finished:
        return result
    try:
        outcome = adapter.keep(job, result)
    except BaseException as exc:
        give_back(job, claim, exception=exc)
        raise
    record(job, claim, outcome)
    return outcome.answer


def _failed(job: Job, adapter: Adapter, claim: Claim, exc: BaseException) -> Any:
    """The work raised ``exc``: store what the interface keeps of it, or release the
    key; answer, or raise ``exc`` again."""
    if job.finished:
        raise exc
    try:
        outcome = adapter.failure(job, exc)
    except BaseException:
        give_back(job, claim, exception=exc)
        raise
    if outcome is None:
        give_back(job, claim, exception=exc)
        raise exc
    record(job, claim, outcome, exception=exc)
    if outcome.answer is exc:
        raise exc
    return outcome.answer


def record(
    job: Job, claim: Claim, outcome: Outcome, exception: BaseException | None = None
) -> None:
    """Complete the record with the outcome (sent again while the store is unreachable,
    for as long as the lease lasts), or release it."""
    if outcome.stored is None:
        if exception is not None:
            give_back(job, claim, exception=exception)
        else:
            give_back(job, claim, status=outcome.status)
        return
    try:
        done = complete(job, claim, outcome)
    except StoreUnavailable:
        backoff = retries(job)
        while True:
            if not backoff.pause():
                unstored(job)
                return
            try:
                done = complete(job, claim, outcome)
            except StoreUnavailable:
                continue
            break
    completed(job, claim, outcome, done)


def give_back(job: Job, claim: Claim, **extra: Any) -> None:
    """Give the key back (its lease ends it where the store is unreachable)."""
    try:
        with step(job, "release", "release") as done:
            freed = done(job.store.release(job.scope, job.key, fence=claim.fence))
    except StoreUnavailable:
        return
    released(job, claim, freed, extra)


# -- async: the same run, the store's async twins and the work awaited ----------------


async def arun_lease(
    job: Job, adapter: Adapter, work: Callable[[], Awaitable[Any]], state: Claim | None
) -> Any:
    """:func:`run_lease` for async work, on the event loop."""
    if unsettled(state):
        state = await asettle(job, adapter, state)
    assert state is not None
    if state.status is not CLAIMED:
        return answer(job, adapter, state)
    claim = state
    if job.quota is not None and not claim.taken_over:
        try:
            refused = await aover_quota(job, adapter)
        except BaseException:
            await agive_back(job, claim)
            raise
        if refused is not None:
            await agive_back(job, claim, status=429)
            return refused
    adapter.bind(job, claim)
    try:
        with kept_alive(
            job.store, job.scope, job.key, fence=claim.fence, lease=job.lease, owner=job.owner
        ):
            job.started = True
            result = await work()
    except BaseException as exc:
        return await _afailed(job, adapter, claim, exc)
    if job.finished:
        return result
    try:
        outcome = await adapter.akeep(job, result)
    except BaseException as exc:
        await agive_back(job, claim, exception=exc)
        raise
    await arecord(job, claim, outcome)
    return outcome.answer


async def _afailed(job: Job, adapter: Adapter, claim: Claim, exc: BaseException) -> Any:
    """:func:`_failed`, awaiting the interface and the store."""
    if job.finished:
        raise exc
    try:
        outcome = await adapter.afailure(job, exc)
    except BaseException:
        await agive_back(job, claim, exception=exc)
        raise
    if outcome is None:
        await agive_back(job, claim, exception=exc)
        raise exc
    await arecord(job, claim, outcome, exception=exc)
    if outcome.answer is exc:
        raise exc
    return outcome.answer


async def arecord(
    job: Job, claim: Claim, outcome: Outcome, exception: BaseException | None = None
) -> None:
    """:func:`record`, awaiting the store and pausing on the loop."""
    if outcome.stored is None:
        if exception is not None:
            await agive_back(job, claim, exception=exception)
        else:
            await agive_back(job, claim, status=outcome.status)
        return
    try:
        done = await acomplete(job, claim, outcome)
    except StoreUnavailable:
        backoff = retries(job)
        while True:
            if not await backoff.apause():
                unstored(job)
                return
            try:
                done = await acomplete(job, claim, outcome)
            except StoreUnavailable:
                continue
            break
    completed(job, claim, outcome, done)


async def agive_back(job: Job, claim: Claim, **extra: Any) -> None:
    """:func:`give_back`, awaiting ``store.arelease``."""
    try:
        with step(job, "release", "release") as done:
            freed = done(await job.store.arelease(job.scope, job.key, fence=claim.fence))
    except StoreUnavailable:
        return
    released(job, claim, freed, extra)


__all__ = [
    "agive_back",
    "arecord",
    "arun_lease",
    "give_back",
    "record",
    "run_lease",
]
