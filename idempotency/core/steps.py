"""The steps the engine's flows yield, and what lease and atomic mode share: the first
look, the wait for a running owner, and the answer to a caller that does not own its key.

A step is a tuple the driver (:mod:`idempotency.core.engine`) carries out and answers:
``(STORE, span, operation, args, kwargs)`` calls the store (``store.<operation>``, or
``store.a<operation>`` for async callers), ``(WORK,)`` runs the work, ``(PAUSE, seconds)``
waits, ``(ADAPT, method, args)`` asks the adapter (its async twin ``a<method>`` where it
has one).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from idempotency import signals
from idempotency.core.backoff import Backoff
from idempotency.core.job import Adapter, Job, Outcome
from idempotency.core.options import lease_over
from idempotency.stores.base import Claim, ClaimStatus

STORE, WORK, PAUSE, ADAPT = range(4)
Step = tuple[Any, ...]
Flow = Generator[Step, Any, Any]

#: A flow's ``first`` when its driver did not take the first look: the flow yields it.
LOOK: Any = object()

#: What a caller waiting on a lock it did not get is told: in progress, retry soon.
BUSY = Claim(ClaimStatus.IN_PROGRESS, retry_after=1.0)


def store_step(job: Job, span: str | None, operation: str, /, *args: Any, **kwargs: Any) -> Step:
    return (STORE, span, operation, (job.scope, job.key, *args), kwargs)


def claim_step(job: Job, *, in_transaction: bool = False) -> Step:
    # the step's tuple built here, not through store_step: every request claims
    return (
        STORE,
        "claim",
        "claim_in_transaction" if in_transaction else "claim",
        (job.scope, job.key),
        {
            "fingerprint": job.fingerprint,
            "lease": job.lease,
            "ttl": job.ttl,
            "method": job.method,
            "route": job.route,
        },
    )


def complete_step(job: Job, claim: Claim, outcome: Outcome) -> Step:
    """Complete the claimed record with ``outcome`` (fenced by the claim's token)."""
    return (
        STORE,
        "complete",
        "complete",
        (job.scope, job.key),
        {
            "fence": claim.fence,
            "response": outcome.stored,
            "ttl": outcome.ttl,
            "fingerprint": job.fingerprint,
        },
    )


def lookup_step(job: Job, method: str = "lookup") -> Step:
    return (STORE, "claim", method, (job.scope, job.key), {"fingerprint": job.fingerprint})


def first_step(job: Job) -> Step:
    """A run's first look: atomic mode peeks (looks up, where the work runs first); lease
    mode claims, or peeks first where its store reads a cache before claiming."""
    if job.mode == "atomic":
        return lookup_step(job, "lookup" if job.optimistic else "peek")
    return lookup_step(job, "peek") if job.store.lookup_before_claim else claim_step(job)


def is_free(state: Claim | None) -> bool:
    """Whether a looked-up state leaves the key to a claim (absent, or its lease over)."""
    return state is None or lease_over(state)


def settle(job: Job, adapter: Adapter, state: Claim | None, *, claims: bool) -> Flow:
    """From a first look (or claim) ``state``, the state to act on: CLAIMED (lease mode:
    ``claims``), COMPLETED, IN_PROGRESS once ``job.wait`` ran out, or a MISMATCH that is
    not the caller's; None where atomic mode (not ``claims``) should claim in its
    transaction. A running owner is waited for (growing pauses, up to ``job.wait``)."""
    if is_free(state):
        state = (yield claim_step(job)) if claims else None
    backoff: Backoff | None = None
    while state is not None:
        if state.status is ClaimStatus.MISMATCH:
            if not adapter.adopts(job, state):
                return state
            state = yield (claim_step(job) if claims else lookup_step(job))
            continue
        if state.status is not ClaimStatus.IN_PROGRESS:
            return state
        backoff = backoff or Backoff(job.wait)
        pause = backoff.next_pause()
        if pause is None:
            return state
        yield (PAUSE, pause)
        state = yield lookup_step(job)
        if is_free(state):
            state = (yield claim_step(job)) if claims else None
    return None


def answer(job: Job, adapter: Adapter, state: Claim) -> Flow:
    """The answer to a caller that does not own the key."""
    if state.status is ClaimStatus.COMPLETED:
        return (yield (ADAPT, "replay", (job, state)))
    if state.status is ClaimStatus.MISMATCH:
        job.send(signals.mismatch)
    else:
        job.send(signals.conflict)
    return adapter.refuse(job, state)


def over_quota(job: Job, adapter: Adapter) -> Flow:
    """Count a new record of the caller's scope: None within ``MAX_NEW_RECORDS``, else
    the answer (the window's remaining seconds as its retry time)."""
    assert job.quota is not None
    limit, window = job.quota
    count, left = yield (STORE, None, "count_new_record", (job.scope,), {"window": window})
    return None if count <= limit else adapter.over_quota(job, left)
