"""The steps lease and atomic mode share: the first look at a key, the wait for its
running owner, the answer to a caller that does not own it, the count of a new record.

Each step calls the store's own method (``store.claim(...)``, ``await
store.aclaim(...)``) inside :class:`step`, which puts it in its span when tracing is on
and adds the seconds of the calls that decide who owns the key to ``job.claim_seconds``.
The sync steps and their async twins (``a``-prefixed) are written once each; what they
decide between store calls (is the key free, what a non-owner is told) is a plain
function both call.
"""

from __future__ import annotations

from time import perf_counter
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.core.backoff import Backoff
from idempotency.core.options import lease_over
from idempotency.observability.tracing import spanned
from idempotency.stores.base import Claim, ClaimStatus

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from idempotency.core.job import Adapter, Job, Outcome

T = TypeVar("T")

COMPLETED = ClaimStatus.COMPLETED
IN_PROGRESS = ClaimStatus.IN_PROGRESS
MISMATCH = ClaimStatus.MISMATCH

#: What a caller waiting on a lock it did not get is told: in progress, retry soon.
BUSY = Claim(IN_PROGRESS, retry_after=1.0)


class Recorder(Protocol):
    """What ``with step(...) as done`` gives: ``done(result)`` records the step's outcome
    on its span (tracing on) and returns ``result``."""

    def __call__(self, result: T, /) -> T: ...


def _as_is(result: T) -> T:
    return result


class step:  # noqa: N801 (a context manager, used like a function)
    """``with step(job, "claim", "peek") as done: state = done(store.peek(...))``: one
    store call (or a replay) in the span ``idempotency.<name>`` (``operation``: which
    call) when tracing is on; a ``claim`` step's seconds added to ``job.claim_seconds``."""

    # one is made for every store call of every request: a class, no generator
    __slots__ = ("job", "claims", "started", "span")

    def __init__(self, job: Job, name: str, operation: str) -> None:
        self.job = job
        self.claims = claims = name == "claim"
        self.started = perf_counter() if claims else 0.0
        self.span: AbstractContextManager[Recorder] | None = (
            spanned(name, job, operation) if idempotency_settings.OPENTELEMETRY else None
        )

    def __enter__(self) -> Recorder:
        return _as_is if self.span is None else self.span.__enter__()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self.span is not None:
                self.span.__exit__(kind, exc, traceback)
        finally:
            if self.claims:
                job = self.job
                job.claim_seconds = (job.claim_seconds or 0.0) + perf_counter() - self.started


# -- what a state means: plain decisions, sync and async alike -------------------------


def is_free(state: Claim | None) -> bool:
    """Whether a looked-up state leaves the key to a claim (absent, or its lease over)."""
    return state is None or lease_over(state)


def unsettled(state: Claim | None) -> bool:
    """Whether a first look (or claim) needs :func:`settle` before the run acts on it:
    nothing found (lease mode claims), an owner to wait for, or a mismatch to adopt."""
    return state is None or state.status is IN_PROGRESS or state.status is MISMATCH


def replay(job: Job, adapter: Adapter, state: Claim) -> Any:
    """The answer from a completed record, in its span (tracing on)."""
    with step(job, "replay", "replay") as done:
        return done(adapter.replay(job, state))


def answer(job: Job, adapter: Adapter, state: Claim) -> Any:
    """The answer to a caller that does not own the key: the completed record replayed,
    or a refusal (a mismatch, or an owner still running once the wait ran out)."""
    if state.status is COMPLETED:
        return replay(job, adapter, state)
    if state.status is MISMATCH:
        job.send(signals.mismatch)
    else:
        job.send(signals.conflict)
    return adapter.refuse(job, state)


def refused_by_quota(job: Job, adapter: Adapter, counted: tuple[int, float]) -> Any:
    """None where the new record's count (and the window's seconds left) is within
    ``MAX_NEW_RECORDS``, else the answer (the seconds left as its retry time)."""
    assert job.quota is not None
    count, left = counted
    return None if count <= job.quota[0] else adapter.over_quota(job, left)


# -- sync --------------------------------------------------------------------------------


def claim(job: Job) -> Claim:
    """Claim the key (lease mode): CLAIMED, or the state of the record that holds it."""
    with step(job, "claim", "claim") as done:
        return done(
            job.store.claim(
                job.scope,
                job.key,
                fingerprint=job.fingerprint,
                lease=job.lease,
                ttl=job.ttl,
                method=job.method,
                route=job.route,
            )
        )


def look(job: Job) -> Claim | None:
    """The key's live record (never CLAIMED), or None."""
    with step(job, "claim", "lookup") as done:
        return done(job.store.lookup(job.scope, job.key, fingerprint=job.fingerprint))


def peek(job: Job) -> Claim | None:
    """:func:`look`, where None may also mean "not known here" (a response cache missed)."""
    with step(job, "claim", "peek") as done:
        return done(job.store.peek(job.scope, job.key, fingerprint=job.fingerprint))


def first_look(job: Job) -> Claim | None:
    """A run's first look: atomic mode peeks (looks up, where the work runs first); lease
    mode claims, or peeks first where its store reads a cache before claiming."""
    if job.mode == "atomic":
        return look(job) if job.optimistic else peek(job)
    return peek(job) if job.store.lookup_before_claim else claim(job)


def settle(job: Job, adapter: Adapter, state: Claim | None, *, claims: bool) -> Claim | None:
    """From a first look (or claim) ``state``, the state to act on: CLAIMED (lease mode:
    ``claims``), COMPLETED, IN_PROGRESS once ``job.wait`` ran out, or a MISMATCH that is
    not the caller's; None where atomic mode (not ``claims``) should claim in its
    transaction. A running owner is waited for (growing pauses, up to ``job.wait``)."""
    if is_free(state):
        state = claim(job) if claims else None
    backoff: Backoff | None = None
    while state is not None:
        if state.status is MISMATCH:
            if not adapter.adopts(job, state):
                return state
            state = claim(job) if claims else look(job)
            continue
        if state.status is not IN_PROGRESS:
            return state
        backoff = backoff or Backoff(job.wait)
        if not backoff.pause():
            return state
        state = look(job)
        if is_free(state):
            state = claim(job) if claims else None
    return None


def complete(job: Job, claim: Claim, outcome: Outcome) -> bool:
    """Complete the claimed record with ``outcome`` (fenced by the claim's token)."""
    with step(job, "complete", "complete") as done:
        return done(
            job.store.complete(
                job.scope,
                job.key,
                fence=claim.fence,
                response=outcome.stored,
                ttl=outcome.ttl,
                fingerprint=job.fingerprint,
            )
        )


def over_quota(job: Job, adapter: Adapter) -> Any:
    """Count a new record of the caller's scope: None within ``MAX_NEW_RECORDS``, else
    the answer."""
    assert job.quota is not None
    counted = job.store.count_new_record(job.scope, window=job.quota[1])
    return refused_by_quota(job, adapter, counted)


# -- async (lease mode): the same steps, the store's async twins awaited ----------------


async def aclaim(job: Job) -> Claim:
    """:func:`claim`, awaiting ``store.aclaim``."""
    with step(job, "claim", "claim") as done:
        return done(
            await job.store.aclaim(
                job.scope,
                job.key,
                fingerprint=job.fingerprint,
                lease=job.lease,
                ttl=job.ttl,
                method=job.method,
                route=job.route,
            )
        )


async def alook(job: Job) -> Claim | None:
    """:func:`look`, awaiting ``store.alookup``."""
    with step(job, "claim", "lookup") as done:
        return done(await job.store.alookup(job.scope, job.key, fingerprint=job.fingerprint))


async def apeek(job: Job) -> Claim | None:
    """:func:`peek`, awaiting ``store.apeek``."""
    with step(job, "claim", "peek") as done:
        return done(await job.store.apeek(job.scope, job.key, fingerprint=job.fingerprint))


async def afirst_look(job: Job) -> Claim | None:
    """:func:`first_look` of an async run (lease mode)."""
    return await (apeek(job) if job.store.lookup_before_claim else aclaim(job))


async def asettle(job: Job, adapter: Adapter, state: Claim | None) -> Claim:
    """:func:`settle` of an async run (lease mode: it claims), pausing on the loop."""
    if is_free(state):
        state = await aclaim(job)
    backoff: Backoff | None = None
    while True:
        assert state is not None
        if state.status is MISMATCH:
            if not adapter.adopts(job, state):
                return state
            state = await aclaim(job)
            continue
        if state.status is not IN_PROGRESS:
            return state
        backoff = backoff or Backoff(job.wait)
        if not await backoff.apause():
            return state
        state = await alook(job)
        if is_free(state):
            state = await aclaim(job)


async def acomplete(job: Job, claim: Claim, outcome: Outcome) -> bool:
    """:func:`complete`, awaiting ``store.acomplete``."""
    with step(job, "complete", "complete") as done:
        return done(
            await job.store.acomplete(
                job.scope,
                job.key,
                fence=claim.fence,
                response=outcome.stored,
                ttl=outcome.ttl,
                fingerprint=job.fingerprint,
            )
        )


async def aover_quota(job: Job, adapter: Adapter) -> Any:
    """:func:`over_quota`, awaiting ``store.acount_new_record``."""
    assert job.quota is not None
    counted = await job.store.acount_new_record(job.scope, window=job.quota[1])
    return refused_by_quota(job, adapter, counted)


__all__ = [
    "BUSY",
    "aclaim",
    "acomplete",
    "afirst_look",
    "alook",
    "answer",
    "aover_quota",
    "apeek",
    "asettle",
    "claim",
    "complete",
    "first_look",
    "is_free",
    "look",
    "over_quota",
    "refused_by_quota",
    "replay",
    "settle",
    "step",
    "unsettled",
]
