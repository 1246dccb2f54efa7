"""Keyed calls: what idempotent functions and Celery tasks give the engine.

A call's job (:func:`call_job`) holds its key, its scope and its fingerprint, with the
options resolved as a view's are (``None``: the ``IDEMPOTENCY`` setting of the same
name, ``MODE`` included). :class:`CallAnswers` is the engine's adapter for them: a
completed key returns its stored result (a stored exception is raised again), a key in
progress raises :class:`~idempotency.exceptions.CallInProgress`, and a key of another
callable or other arguments :class:`CallableMismatch` or :class:`ArgumentsMismatch`.
Keys and argument hashes come from :mod:`idempotency.functions.arguments`, stored results from
:mod:`idempotency.functions.results`.

A record's fingerprint is 32 hex digits naming the function or task that owns the key
and 32 hashing its arguments (:func:`call_fingerprint`). A record stored before
arguments were fingerprinted (the 64-digit name hash, :func:`fingerprint_of`), or under
an older secret, is still that callable's own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from idempotency import signals
from idempotency.core.job import CallPolicy, Job, Outcome, ReplayedRecord
from idempotency.exceptions import (
    ArgumentsMismatch,
    CallableMismatch,
    CallInProgress,
    KeyMismatch,
)
from idempotency.functions.arguments import (
    KeySpec,
    call_fingerprint,
    check_key,
    fingerprint_of,
    key_builder,
    qualified_name,
)
from idempotency.functions.results import ResultCodec, UnreadableResult, storable_error
from idempotency.stores.base import AtomicStore, ClaimStatus, KeyState, unreadable_record

__all__ = [
    "ArgumentsMismatch",
    "CallAnswers",
    "CallableMismatch",
    "KeySpec",
    "call_fingerprint",
    "call_job",
    "check_key",
    "fingerprint_of",
    "key_builder",
    "qualified_name",
]

logger = logging.getLogger("idempotency")

#: ``method`` recorded for the admin: which kind of caller claimed a record.
FUNCTION_METHOD = "FUNCTION"
TASK_METHOD = "TASK"


def call_job(
    policy: CallPolicy,
    *,
    scope: str,
    key: str,
    fingerprint: str,
    owner: str,
    interface: str,
    asynchronous: bool = False,
) -> Job:
    """The job of one call of a function (``interface="function"``) or task (``"task"``),
    its options resolved from ``policy``. An async call runs in lease mode."""
    store = policy.get_store()
    atomic = not asynchronous and policy.runs_atomic(store)
    return Job(
        store=store,
        scope=scope,
        key=key,
        fingerprint=fingerprint,
        mode="atomic" if atomic else "lease",
        lease=policy.get_lease(),
        ttl=policy.get_ttl(),
        wait=policy.get_wait(),
        method=TASK_METHOD if interface == "task" else FUNCTION_METHOD,
        route=owner,
        owner=owner,
        interface=interface,
        databases=policy.get_databases(store.using) if isinstance(store, AtomicStore) else [],
    )


@dataclass
class CallAnswers:
    """The engine's adapter for a function's or task's call."""

    codec: ResultCodec
    store_errors: bool = False
    on_replay: Callable[[Any, ReplayedRecord], Any] | None = None
    #: The owner-only fingerprint (:func:`fingerprint_of`): records stored with it, before
    #: arguments were fingerprinted, are this callable's own
    legacy: str = ""
    #: The fingerprint under older secrets, or unkeyed (rotation; records stored before
    #: fingerprints were keyed): records stored with one of them are this call's own
    older: Callable[[], list[str]] | None = None

    def adopts(self, job: Job, claim: KeyState) -> bool:
        """A MISMATCH that is this callable's own record after all: one stored under an
        older secret or unkeyed (:attr:`older`), or without the arguments' hash (or with
        it, where this call leaves arguments out). The call takes that record's
        fingerprint and claims again."""
        stored, legacy = claim.fingerprint, self.legacy
        if not stored or stored == job.fingerprint:
            return False
        if self.older is not None and stored in self.older():
            job.fingerprint = stored
            return True
        if not legacy or stored[:32] != legacy[:32]:
            return False
        if stored == legacy or job.fingerprint == legacy:
            job.fingerprint = stored
            return True
        return False

    def replay(self, job: Job, claim: KeyState) -> Any:
        """The stored result of a completed key (a stored exception is raised)."""
        record = ReplayedRecord.of(job, claim)
        job.send(signals.replayed, record=record, expires_at=record.expires_at)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("idempotency: %s already done; returning its stored result", job.ref)
        try:
            result = self.codec.decode(claim.response)
        except UnreadableResult as exc:
            # forged or damaged: never rebuilt into an undeclared class, never run again
            where = type(job.store).__name__
            raise unreadable_record(where, job.scope, job.key, str(exc)) from exc
        if self.on_replay is not None:
            result = self.on_replay(result, record)
        return result

    def refuse(self, job: Job, claim: KeyState) -> Any:
        raise self.refusal(job, claim)

    def refusal(self, job: Job, claim: KeyState) -> Exception:
        """The exception for a call that cannot run: in progress, or a key mismatch."""
        if claim.status is not ClaimStatus.MISMATCH:
            return CallInProgress(job.scope, job.key)
        mismatch: KeyMismatch
        if claim.fingerprint and claim.fingerprint[:32] == job.fingerprint[:32]:
            mismatch = ArgumentsMismatch(job.scope, job.key, job.owner)
        else:
            mismatch = CallableMismatch(job.scope, job.key, job.owner)
        return mismatch

    def over_quota(self, job: Job, retry_after: float) -> Any:  # pragma: no cover
        raise AssertionError("calls have no MAX_NEW_RECORDS")

    def bind(self, job: Job, claim: KeyState | None) -> None:
        return None

    def keep(self, job: Job, result: Any) -> Outcome:
        """``result`` encoded for the record; the caller gets what a replay will return
        (an unstorable result raises, and the engine releases the key)."""
        stored = self.codec.encode(result)
        return Outcome(stored, self.codec.decode(stored), job.ttl)

    def failure(self, job: Job, exc: BaseException) -> Outcome | None:
        """Store the body's exception (``store_errors``) so repeats raise it too, or
        release the key (None)."""
        if self.store_errors and storable_error(exc):
            return Outcome(self.codec.encode_error(exc), exc, job.ttl)
        return None

    async def akeep(self, job: Job, result: Any) -> Outcome:
        """:meth:`keep` (an async body's result is encoded as a sync one's)."""
        return self.keep(job, result)

    async def afailure(self, job: Job, exc: BaseException) -> Outcome | None:
        """:meth:`failure` (an async body's exception is kept as a sync one's)."""
        return self.failure(job, exc)
