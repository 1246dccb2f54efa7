"""Lease mode (any store): claim the key with a lease and a fencing token, or wait for
its owner; run the work while a keep-alive renews the lease; complete the record with
the outcome, or release it, proven by the token."""

from __future__ import annotations

from typing import Any

from idempotency import signals
from idempotency.core.backoff import Backoff
from idempotency.core.job import Adapter, Job, Outcome, logger
from idempotency.core.keepalive import kept_alive
from idempotency.core.steps import (
    ADAPT,
    LOOK,
    PAUSE,
    WORK,
    Flow,
    answer,
    complete_step,
    first_step,
    over_quota,
    settle,
    store_step,
)
from idempotency.exceptions import StoreUnavailable
from idempotency.stores.base import Claim, ClaimStatus

#: A completion the store could not take is sent again after these pauses (seconds),
#: growing, until the lease runs out.
RETRY_FIRST_PAUSE = 0.05
RETRY_LONGEST_PAUSE = 1.0

CLAIMED = ClaimStatus.CLAIMED
COMPLETED = ClaimStatus.COMPLETED
IN_PROGRESS = ClaimStatus.IN_PROGRESS
MISMATCH = ClaimStatus.MISMATCH


def lease_flow(job: Job, adapter: Adapter, first: Any = LOOK) -> Flow:
    """Own the key or answer from its record; over ``MAX_NEW_RECORDS``, give it back;
    run the work under keep-alive; keep its outcome, or release the key. ``first``: what
    the first look found, where the driver took it (else it is the first step)."""
    state = (yield first_step(job)) if first is LOOK else first
    # a claim taken or a completed record needs no settling (most requests): no generator
    if state is None or state.status is IN_PROGRESS or state.status is MISMATCH:
        state = yield from settle(job, adapter, state, claims=True)
        assert state is not None
    if state.status is not CLAIMED:
        if state.status is COMPLETED:
            return (yield (ADAPT, "replay", (job, state)))
        return (yield from answer(job, adapter, state))
    claim = state
    if job.quota is not None and not claim.taken_over:
        try:
            refused = yield from over_quota(job, adapter)
        except BaseException:
            yield from give_back(job, claim)
            raise
        if refused is not None:
            yield from give_back(job, claim, status=429)
            return refused
    adapter.bind(job, claim)
    try:
        with kept_alive(
            job.store, job.scope, job.key, fence=claim.fence, lease=job.lease, owner=job.owner
        ):
            result = yield (WORK,)
    except BaseException as exc:
        return (yield from _failed(job, claim, exc))
    if job.finished:
        return result
    try:
        outcome = yield (ADAPT, "keep", (job, result))
    except BaseException as exc:
        yield from give_back(job, claim, exception=exc)
        raise
    yield from _record(job, claim, outcome)
    return outcome.answer


def _failed(job: Job, claim: Claim, exc: BaseException) -> Flow:
    """Lease mode: the work raised ``exc``; store what the interface keeps of it, or
    release the key; answer, or raise ``exc`` again."""
    if job.finished:
        raise exc
    try:
        outcome = yield (ADAPT, "failure", (job, exc))
    except BaseException:
        yield from give_back(job, claim, exception=exc)
        raise
    if outcome is None:
        yield from give_back(job, claim, exception=exc)
        raise exc
    yield from _record(job, claim, outcome, exception=exc)
    if outcome.answer is exc:
        raise exc
    return outcome.answer


def _record(
    job: Job, claim: Claim, outcome: Outcome, exception: BaseException | None = None
) -> Flow:
    """Lease mode: complete the record with the outcome, or release it."""
    if outcome.stored is None:
        if exception is not None:
            yield from give_back(job, claim, exception=exception)
        else:
            yield from give_back(job, claim, status=outcome.status)
        return
    try:
        done = yield complete_step(job, claim, outcome)
    except StoreUnavailable:
        done = yield from _complete_again(job, claim, outcome)
        if done is None:
            # the work ran: its caller gets its outcome. The claim ends with its lease, and
            # a repeat after that runs the work again (its effects need their own unique
            # keys).
            logger.warning(
                "idempotency: %s ran but its outcome could not be stored (store unreachable "
                "for a whole lease, %.1f s); a repeat after the lease runs it again",
                job.ref,
                job.lease,
            )
            return
    if done:
        job.send(signals.stored, status=outcome.status)
    else:
        job.stale(claim, "completion")


def _complete_again(job: Job, claim: Claim, outcome: Outcome) -> Flow:
    """The completion could not be stored (the store unreachable): try again, after
    growing pauses, for as long as the lease lasts. Until it runs out no retry can take
    the key over, and the completion is fenced, so a store that comes back within the
    lease keeps the outcome (the work never runs twice); a completion whose first send
    did land answers as it did (its resend recognises its own token). Whether it was
    stored, or None when the lease ran out first."""
    backoff = Backoff(job.lease, first=RETRY_FIRST_PAUSE, cap=RETRY_LONGEST_PAUSE, jitter=True)
    while (pause := backoff.next_pause()) is not None:
        yield (PAUSE, pause)
        try:
            return bool((yield complete_step(job, claim, outcome)))
        except StoreUnavailable:
            continue
    return None


def give_back(job: Job, claim: Claim, **extra: Any) -> Flow:
    """Lease mode: give the key back (its lease ends it where the store is unreachable)."""
    try:
        released = yield store_step(job, "release", "release", fence=claim.fence)
    except StoreUnavailable:
        return
    if released:
        job.send(signals.released, **extra)
    else:
        job.stale(claim, "release")
