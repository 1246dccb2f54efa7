"""The engine: one keyed run, for views, functions and tasks alike, in direct calls.

:func:`run` (sync) and :func:`arun` (async) take the first look at the key and replay a
completed record at once; any other state goes to the run's mode, which reads top to
bottom: claim or wait for the owner, or answer; run the work; complete the record or
release it; store the error the interface keeps. Each step calls the store's typed
method (``store.claim(...)``, ``await store.aclaim(...)``) inside :class:`step`, its
span when tracing is on. Everything that differs between interfaces (how a caller is
answered) comes from the :class:`~idempotency.core.job.Adapter`.

**Lease mode** (any store; :func:`run_lease`, and :func:`arun_lease` for async work):
claim the key (a record with a lease and a fencing token) or wait for its owner; run
the work while a keep-alive renews the lease; complete the record with the outcome, or
release it, proven by the token.

**Atomic mode** (an :class:`~idempotency.stores.base.AtomicStore`, sync only;
:func:`run_atomic`): claim the key inside a transaction with the work's own writes and
store the outcome in it, so they commit together; a released outcome rolls back claim
and writes alike. With ``optimistic``, the work runs first and the completed record is
inserted last.

The module reads in that order: the entry points, lease mode, atomic mode, the steps
both modes share (and the plain decisions between them), then the async twins of lease
mode and its steps, each written once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from time import perf_counter
from types import TracebackType
from typing import Any, Protocol, TypeVar

from django.db import DatabaseError, IntegrityError, OperationalError

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.core.job import Adapter, Job, Outcome, lease_over, logger
from idempotency.core.keepalive import kept_alive
from idempotency.exceptions import StoreUnavailable
from idempotency.observability import spanned
from idempotency.stores.base import AtomicStore, ClaimLocked, ClaimStatus, KeyState
from idempotency.utils.backoff import Backoff
from idempotency.utils.outages import is_lock_error, is_outage, unavailable

T = TypeVar("T")

CLAIMED = ClaimStatus.CLAIMED
COMPLETED = ClaimStatus.COMPLETED
IN_PROGRESS = ClaimStatus.IN_PROGRESS
MISMATCH = ClaimStatus.MISMATCH

#: What a caller waiting on a lock it did not get is told: in progress, retry soon.
BUSY = KeyState(IN_PROGRESS, retry_after=1.0)

#: A completion the store could not take is sent again after these pauses (seconds),
#: growing, until the lease runs out.
RETRY_FIRST_PAUSE = 0.05
RETRY_LONGEST_PAUSE = 1.0

#: Attempts of an atomic-mode claim chosen as a deadlock's victim. On MySQL/MariaDB the
#: duplicates waiting on a claim whose transaction rolls back meet on the freed gap of
#: the unique index, and InnoDB rolls all but one back: the claim was the transaction's
#: first statement, so it starts again and finds the new owner.
CLAIM_ATTEMPTS = 3


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


def release(job: Job, claim: KeyState, reason: BaseException | None = None) -> None:
    """Give ``job``'s key back now, while its work runs (a task's ``retry()``): nothing
    is stored when the work ends."""
    job.finished = True
    if job.mode == "atomic":
        assert isinstance(job.store, AtomicStore)
        job.store.roll_back(job.databases)
        rolled_back(job, exception=reason)
        return
    give_back(job, claim, exception=reason)


# -- lease mode ------------------------------------------------------------------------


def run_lease(job: Job, adapter: Adapter, work: Callable[[], Any], state: KeyState | None) -> Any:
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


def _failed(job: Job, adapter: Adapter, claim: KeyState, exc: BaseException) -> Any:
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
    job: Job, claim: KeyState, outcome: Outcome, exception: BaseException | None = None
) -> None:
    """Complete the record with the outcome (sent again while the store is unreachable,
    for as long as the lease lasts), or release it."""
    if outcome.stored is None:
        return give_back(job, claim, **released_with(outcome, exception))
    backoff = None
    while True:
        try:
            done = complete(job, claim, outcome)
            break
        except StoreUnavailable:
            backoff = backoff or retries(job)
            if not backoff.pause():
                return unstored(job)
    completed(job, claim, outcome, done)


def released_with(outcome: Outcome, exception: BaseException | None) -> dict[str, Any]:
    """What the ``released`` signal of an outcome kept nothing of carries."""
    return {"status": outcome.status} if exception is None else {"exception": exception}


def give_back(job: Job, claim: KeyState, **extra: Any) -> None:
    """Give the key back (its lease ends it where the store is unreachable)."""
    try:
        with step(job, "release", "release") as done:
            freed = done(job.store.release(job.scope, job.key, fence=claim.fence))
    except StoreUnavailable:
        return
    released(job, claim, freed, extra)


def completed(job: Job, claim: KeyState, outcome: Outcome, done: bool) -> None:
    """The completion was sent: ``done``, or refused (a stale owner)."""
    if done:
        job.send(signals.stored, status=outcome.status)
    else:
        job.stale(claim, "completion")


def released(job: Job, claim: KeyState, done: bool, extra: dict[str, Any]) -> None:
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


# -- atomic mode (sync only) -----------------------------------------------------------


def run_atomic(job: Job, adapter: Adapter, work: Callable[[], Any], state: KeyState | None) -> Any:
    """Answer from the key's record (``state``: what the first look found), or claim it
    in the work's transaction, run the work and store its outcome there (or, with
    ``optimistic``, run the work and insert the completed record last)."""
    store = job.store
    assert isinstance(store, AtomicStore)
    if state is not None and (state.status is IN_PROGRESS or state.status is MISMATCH):
        state = settle(job, adapter, state, claims=False)  # only these wait or adopt
    if state is None and job.quota is not None:
        if not job.optimistic:
            # the first look was a peek, which may read only a cache: look the key up, so
            # a replay the peek missed is not counted as a new record
            state = settle(job, adapter, look(job), claims=False)
        if state is None:  # a new record: counted before its transaction opens
            refused = over_quota(job, adapter)
            if refused is not None:
                return refused
    if state is not None:
        return answer(job, adapter, state)
    if job.optimistic:
        return _optimistic(job, adapter, store, work)
    # a deadlock's victim starts again only where its transaction is the outermost one
    # (under ATOMIC_REQUESTS the server rolled the request's own transaction back too)
    outermost = store.outermost()
    for attempt in range(1, CLAIM_ATTEMPTS + 1):
        try:
            with store.transaction(job.databases):
                claim = _claim_in_transaction(job, store)
                while claim.status is MISMATCH and adapter.adopts(job, claim):
                    claim = _claim_in_transaction(job, store)
                if not claim.owned:
                    raise _NotOwner(claim)  # nothing written: the transaction ends empty
                adapter.bind(job, claim)
                job.started = True
                result = work()
                outcome = _kept(job, adapter, result)
                if outcome.stored is None:
                    store.roll_back(job.databases)
                elif not complete(job, claim, outcome):  # pragma: no cover
                    # the claim is ours until this transaction ends
                    raise _LostRace
        except _NotOwner as lost:
            state = settle(job, adapter, lost.claim, claims=False)
            return answer(job, adapter, state or lost.claim)
        except _Unkept as unkept:
            rolled_back(job, exception=unkept.error)
            raise unkept.error from unkept.error.__cause__
        except ClaimLocked as locked:
            if locked.deadlock and outermost and attempt < CLAIM_ATTEMPTS:
                continue  # the work never ran and the server rolled everything back
            return answer(job, adapter, BUSY)
        except Exception as exc:
            return _atomic_failure(job, adapter, store, exc, claimed_first=True)
        return _committed(job, outcome)
    raise AssertionError("unreachable")  # pragma: no cover


def _claim_in_transaction(job: Job, store: AtomicStore) -> KeyState:
    """Claim the key inside the open transaction (its lock wait bounded by ``LOCK_TIMEOUT``)."""
    with step(job, "claim", "claim_in_transaction") as done:
        return done(
            store.claim_in_transaction(
                job.scope,
                job.key,
                fingerprint=job.fingerprint,
                lease=job.lease,
                ttl=job.ttl,
                method=job.method,
                route=job.route,
            )
        )


def _optimistic(job: Job, adapter: Adapter, store: AtomicStore, work: Callable[[], Any]) -> Any:
    """Optimistic: run the work, insert the completed record last."""
    adapter.bind(job, None)
    try:
        with store.transaction(job.databases):
            store.bound_lock_waits()
            job.started = True
            result = work()
            outcome = _kept(job, adapter, result)
            if outcome.stored is None:
                store.roll_back(job.databases)
            elif not _insert_completed(job, store, outcome):
                raise _LostRace
    except _Unkept as unkept:
        rolled_back(job, exception=unkept.error)
        raise unkept.error from unkept.error.__cause__
    except Exception as exc:
        return _atomic_failure(job, adapter, store, exc, claimed_first=False)
    return _committed(job, outcome)


def _insert_completed(job: Job, store: AtomicStore, outcome: Outcome) -> bool:
    """Insert the completed record in the open transaction; False where a live record
    holds the key (a concurrent duplicate committed first)."""
    with step(job, "complete", "insert_completed") as done:
        return done(
            store.insert_completed(
                job.scope,
                job.key,
                fingerprint=job.fingerprint,
                response=outcome.stored,
                ttl=outcome.ttl,
                method=job.method,
                route=job.route,
            )
        )


def _committed(job: Job, outcome: Outcome) -> Any:
    """The transaction ended: signal its outcome, answer the caller."""
    if outcome.stored is None:
        rolled_back(job, status=outcome.status)
    else:
        job.send(signals.stored, status=outcome.status)
    return outcome.answer


def _atomic_failure(
    job: Job, adapter: Adapter, store: AtomicStore, exc: Exception, *, claimed_first: bool
) -> Any:
    """The transaction rolled back; answer for the winner, or for the error.

    With the claim taken first no duplicate can have run, so an ``IntegrityError`` or a
    lock error is the work's own failure, never a lost race. The error's outcome, where
    the interface keeps one (a definitive 4xx, a stored exception), is inserted after
    the rollback, so a repeat replays it instead of running again."""
    if job.finished:  # given back during the work (a task's retry()): nothing to keep
        raise exc
    if isinstance(exc, StoreUnavailable):
        raise exc  # the caller's interface answers an outage (503, or runs unprotected)
    if isinstance(exc, DatabaseError) and is_outage(exc):
        # the database went away under the transaction (a query, the completion, the
        # commit): it rolled back, or committed whole, so a retry either replays or runs
        # once. Answered as the store's outage (503 with Retry-After), never a bare 500
        raise unavailable(
            "database", "commit", exc, sender=type(store), scope=job.scope, key=job.key
        ) from exc
    if not claimed_first:
        lost = isinstance(exc, _LostRace | IntegrityError)
        locked = isinstance(exc, OperationalError) and is_lock_error(exc)
        if lost or locked:
            # a committed duplicate won the key (our insert, or the work's own unique insert)
            winner = look(job)
            if winner is not None:
                return answer(job, adapter, winner)
            if not isinstance(exc, IntegrityError):
                return answer(job, adapter, BUSY)
    outcome = adapter.failure(job, exc)
    if outcome is None or outcome.stored is None:
        rolled_back(job, exception=exc)
        if outcome is None or outcome.answer is exc:
            raise exc
        return outcome.answer
    with store.atomic():
        inserted = _insert_completed(job, store, outcome)
    if inserted:
        job.send(signals.stored, status=outcome.status)
    else:
        winner = look(job)
        if winner is not None:
            return answer(job, adapter, winner)
    if outcome.answer is exc:
        raise exc
    return outcome.answer


class _NotOwner(Exception):
    """Atomic mode: the key is held by a live record; answer from it."""

    def __init__(self, claim: KeyState) -> None:
        super().__init__()
        self.claim = claim


class _Unkept(Exception):
    """Atomic mode: the work's result cannot be kept (the adapter raised ``error``): the
    transaction rolls back and the caller gets ``error``, never a stored failure."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error


def rolled_back(job: Job, **extra: Any) -> None:
    """The transaction rolled back, and the claim with it: the key is free again (no
    store call; traced as ``idempotency.release`` around the signal)."""
    with spanned("release", job, "release") as done:
        job.send(signals.released, **extra)
        done(True)


def _kept(job: Job, adapter: Adapter, result: Any) -> Outcome:
    try:
        return adapter.keep(job, result)
    except Exception as exc:
        raise _Unkept(exc) from exc


class _LostRace(Exception):
    """Atomic mode, optimistic: a concurrent duplicate committed the key first."""


# -- the steps both modes share, and what a state means --------------------------------


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


def claim_key(job: Job) -> KeyState:
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


def look(job: Job) -> KeyState | None:
    """The key's live record (never CLAIMED), or None."""
    with step(job, "claim", "lookup") as done:
        return done(job.store.lookup(job.scope, job.key, fingerprint=job.fingerprint))


def peek(job: Job) -> KeyState | None:
    """:func:`look`, where None may also mean "not known here" (a response cache missed)."""
    with step(job, "claim", "peek") as done:
        return done(job.store.peek(job.scope, job.key, fingerprint=job.fingerprint))


def first_look(job: Job) -> KeyState | None:
    """A run's first look: atomic mode peeks (looks up, where the work runs first); lease
    mode claims, or peeks first where its store reads a cache before claiming."""
    if job.mode == "atomic":
        return look(job) if job.optimistic else peek(job)
    return peek(job) if job.store.lookup_before_claim else claim_key(job)


def settle(job: Job, adapter: Adapter, state: KeyState | None, *, claims: bool) -> KeyState | None:
    """From a first look (or claim) ``state``, the state to act on: CLAIMED (lease mode:
    ``claims``), COMPLETED, IN_PROGRESS once ``job.wait`` ran out, or a MISMATCH that is
    not the caller's; None where atomic mode (not ``claims``) should claim in its
    transaction. A running owner is waited for (growing pauses, up to ``job.wait``)."""
    if is_free(state):
        state = claim_key(job) if claims else None
    backoff: Backoff | None = None
    while state is not None:
        if state.status is MISMATCH:
            if not adapter.adopts(job, state):
                return state
            state = claim_key(job) if claims else look(job)
            continue
        if state.status is not IN_PROGRESS:
            return state
        backoff = backoff or Backoff(job.wait)
        if not backoff.pause():
            return state
        state = look(job)
        if is_free(state):
            state = claim_key(job) if claims else None
    return None


def complete(job: Job, claim: KeyState, outcome: Outcome) -> bool:
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


def is_free(state: KeyState | None) -> bool:
    """Whether a looked-up state leaves the key to a claim (absent, or its lease over)."""
    return state is None or lease_over(state)


def unsettled(state: KeyState | None) -> bool:
    """Whether a first look (or claim) needs :func:`settle` before the run acts on it:
    nothing found (lease mode claims), an owner to wait for, or a mismatch to adopt."""
    return state is None or state.status is IN_PROGRESS or state.status is MISMATCH


def replay(job: Job, adapter: Adapter, state: KeyState) -> Any:
    """The answer from a completed record, in its span (tracing on)."""
    with step(job, "replay", "replay") as done:
        return done(adapter.replay(job, state))


def answer(job: Job, adapter: Adapter, state: KeyState) -> Any:
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


# -- async: lease mode and its steps, the store's async twins awaited ------------------


async def arun_lease(
    job: Job, adapter: Adapter, work: Callable[[], Awaitable[Any]], state: KeyState | None
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


async def _afailed(job: Job, adapter: Adapter, claim: KeyState, exc: BaseException) -> Any:
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
    job: Job, claim: KeyState, outcome: Outcome, exception: BaseException | None = None
) -> None:
    if outcome.stored is None:
        return await agive_back(job, claim, **released_with(outcome, exception))
    backoff = None
    while True:
        try:
            done = await acomplete(job, claim, outcome)
            break
        except StoreUnavailable:
            backoff = backoff or retries(job)
            if not await backoff.apause():
                return unstored(job)
    completed(job, claim, outcome, done)


async def agive_back(job: Job, claim: KeyState, **extra: Any) -> None:
    try:
        with step(job, "release", "release") as done:
            freed = done(await job.store.arelease(job.scope, job.key, fence=claim.fence))
    except StoreUnavailable:
        return
    released(job, claim, freed, extra)


async def aclaim_key(job: Job) -> KeyState:
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


async def alook(job: Job) -> KeyState | None:
    with step(job, "claim", "lookup") as done:
        return done(await job.store.alookup(job.scope, job.key, fingerprint=job.fingerprint))


async def apeek(job: Job) -> KeyState | None:
    with step(job, "claim", "peek") as done:
        return done(await job.store.apeek(job.scope, job.key, fingerprint=job.fingerprint))


async def afirst_look(job: Job) -> KeyState | None:
    """:func:`first_look` of an async run (lease mode)."""
    return await (apeek(job) if job.store.lookup_before_claim else aclaim_key(job))


async def asettle(job: Job, adapter: Adapter, state: KeyState | None) -> KeyState:
    """:func:`settle` of an async run (lease mode: it claims), pausing on the loop."""
    if is_free(state):
        state = await aclaim_key(job)
    backoff: Backoff | None = None
    while True:
        assert state is not None
        if state.status is MISMATCH:
            if not adapter.adopts(job, state):
                return state
            state = await aclaim_key(job)
            continue
        if state.status is not IN_PROGRESS:
            return state
        backoff = backoff or Backoff(job.wait)
        if not await backoff.apause():
            return state
        state = await alook(job)
        if is_free(state):
            state = await aclaim_key(job)


async def acomplete(job: Job, claim: KeyState, outcome: Outcome) -> bool:
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
    assert job.quota is not None
    counted = await job.store.acount_new_record(job.scope, window=job.quota[1])
    return refused_by_quota(job, adapter, counted)


__all__ = ["arun", "release", "run"]
