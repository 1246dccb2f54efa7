"""Atomic mode (an :class:`~idempotency.stores.atomic.AtomicStore`, sync only): the key
is claimed inside one transaction with the work's own writes, and the outcome is stored
in it, so they commit together; a released outcome rolls back claim and writes alike.
With ``optimistic`` the work runs first and the completed record is inserted last."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, IntegrityError, OperationalError

from idempotency import signals
from idempotency.core.job import Adapter, Job, Outcome
from idempotency.core.outages import is_lock_error, is_outage, unavailable
from idempotency.core.steps import BUSY, answer, complete, look, over_quota, settle, step
from idempotency.exceptions import StoreUnavailable
from idempotency.observability.tracing import spanned
from idempotency.stores.atomic import AtomicStore, ClaimLocked
from idempotency.stores.base import Claim, ClaimStatus

IN_PROGRESS = ClaimStatus.IN_PROGRESS
MISMATCH = ClaimStatus.MISMATCH

#: Attempts of an atomic-mode claim chosen as a deadlock's victim. On MySQL/MariaDB the
#: duplicates waiting on a claim whose transaction rolls back meet on the freed gap of
#: the unique index, and InnoDB rolls all but one back: the claim was the transaction's
#: first statement, so it starts again and finds the new owner.
CLAIM_ATTEMPTS = 3


class _NotOwner(Exception):
    """Atomic mode: the key is held by a live record; answer from it."""

    def __init__(self, claim: Claim) -> None:
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


def run_atomic(job: Job, adapter: Adapter, work: Callable[[], Any], state: Claim | None) -> Any:
    """Answer from the key's record (``state``: what the first look found), or claim it
    in the work's transaction, run the work and store its outcome there (or, with
    ``optimistic``, run the work and insert the completed record last)."""
    store = job.store
    assert isinstance(store, AtomicStore)
    if state is not None and (state.status is IN_PROGRESS or state.status is MISMATCH):
        state = settle(job, adapter, state, claims=False)  # only these wait or adopt
    if state is None and job.quota is not None:
        # claim first answers for any record a peek misses; insert-last must see them all
        if not job.optimistic:  # a peek may read only a cache: a replay it missed is no new record
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


def _claim_in_transaction(job: Job, store: AtomicStore) -> Claim:
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
