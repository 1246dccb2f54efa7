"""The keyed-call engine that idempotent functions and Celery tasks share.

A call under a key (:class:`KeyedCall`) is claimed in the store with a lease and a
fencing token (:func:`acquire`, waiting for a running owner), then either returns a
completed key's stored result (:func:`replayed`) or runs and stores its own
(:func:`finish`; :func:`fail` for an exception). Keys and argument hashes come from
:mod:`idempotency.arguments`, stored results from :mod:`idempotency.results`.

A record's fingerprint is 32 hex digits naming the function or task that owns the key
and 32 hashing its arguments (:func:`call_fingerprint`), so a key used by another
callable raises :class:`FunctionKeyMismatch` and the same key with other arguments
:class:`ArgumentsMismatch`. A record stored before arguments were fingerprinted (the
64-digit name hash, :func:`fingerprint_of`) is still that callable's own.

The flow is the lease mode of the HTTP layer (:mod:`idempotency.http.lease`) over
the store contract (:mod:`idempotency.stores.base`); atomic mode runs it inside a
transaction of the store's database (:func:`run`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.db import transaction

from idempotency import signals
from idempotency.arguments import (
    KeySpec,
    call_fingerprint,
    check_key,
    fingerprint_of,
    key_builder,
    qualified_name,
)
from idempotency.backoff import Backoff
from idempotency.exceptions import (
    ArgumentsMismatch,
    FunctionKeyMismatch,
    IdempotencyKeyMismatch,
    InProgress,
    StoreUnavailable,
)
from idempotency.keepalive import keep_call_alive
from idempotency.keyed import log_ref
from idempotency.policy import lease_over
from idempotency.results import ResultCodec, UnreadableResult, storable_error
from idempotency.stores.base import BaseStore, Claim, ClaimStatus, unreadable_record
from idempotency.tracing import step

__all__ = [
    "ArgumentsMismatch",
    "FunctionKeyMismatch",
    "KeySpec",
    "KeyedCall",
    "ReplayedRecord",
    "call_fingerprint",
    "check_key",
    "fingerprint_of",
    "key_builder",
    "qualified_name",
]

logger = logging.getLogger("idempotency")

#: ``method`` recorded for the admin: which kind of caller claimed a record.
FUNCTION_METHOD = "FUNCTION"


@dataclass(frozen=True, slots=True)
class ReplayedRecord:
    """What a replay knows of the record it answered from (``on_replay``, ``replayed``)."""

    scope: str
    key: str
    owner: str
    #: When the record expires and the key runs again, or None where the store does not say.
    expires_at: datetime | None


# -- the flow over the store contract ----------------------------------------------------


@dataclass(slots=True)
class KeyedCall:
    """One call under a key: what the store is asked, and how long to wait."""

    store: BaseStore
    scope: str
    key: str
    fingerprint: str
    owner: str
    lease: float
    ttl: float
    wait: float
    method: str = FUNCTION_METHOD
    #: The claim lives in an open transaction of the store's database (atomic mode)
    atomic: bool = False
    codec: ResultCodec = field(default_factory=lambda: ResultCodec(owner="?"))
    store_errors: bool = False
    on_replay: Callable[[Any, ReplayedRecord], Any] | None = None
    #: The owner-only fingerprint (:func:`fingerprint_of`): records stored with it, before
    #: arguments were fingerprinted, are this callable's own
    legacy: str = ""
    #: The fingerprint under older secrets, or unkeyed (rotation; records stored before
    #: fingerprints were keyed): records stored with one of them are this call's own
    older: Callable[[], list[str]] | None = None
    #: Atomic mode, ``store_errors``: the exception to store once its transaction rolled back
    failed: Exception | None = None

    #: What its spans say (``idempotency.tracing``): a function's or task's scope is a
    #: namespace the code names, shared by every caller.
    scope_kind = "shared"

    @property
    def mode(self) -> str:
        return "atomic" if self.atomic else "lease"

    @property
    def interface(self) -> str:
        return "function" if self.method == FUNCTION_METHOD else "task"

    def claim(self) -> Claim:
        return step(
            "claim",
            self,
            self.store.claim,
            self.scope,
            self.key,
            fingerprint=self.fingerprint,
            lease=self.lease,
            ttl=self.ttl,
            method=self.method,
            route=self.owner,
        )

    def lookup(self) -> Claim | None:
        return step(
            "claim", self, self.store.lookup, self.scope, self.key, fingerprint=self.fingerprint
        )

    def in_progress(self) -> InProgress:
        signals.conflict.send(sender=type(self.store), request=None, scope=self.scope, key=self.key)
        return InProgress(self.scope, self.key)

    def adopts(self, claim: Claim) -> bool:
        """A MISMATCH that is this callable's own record after all: one stored under an
        older secret or unkeyed (:attr:`older`), or without the arguments' hash (or with
        it, where this call leaves arguments out). The call takes that record's
        fingerprint and claims again."""
        stored, legacy = claim.fingerprint, self.legacy
        if stored and self.older is not None and stored in self.older():
            self.fingerprint = stored
            return True
        if not stored or not legacy or stored[:32] != legacy[:32]:
            return False
        if stored == legacy or self.fingerprint == legacy:
            self.fingerprint = stored
            return True
        return False

    def mismatch(self, claim: Claim) -> IdempotencyKeyMismatch:
        signals.mismatch.send(sender=type(self.store), request=None, scope=self.scope, key=self.key)
        if claim.fingerprint and claim.fingerprint[:32] == self.fingerprint[:32]:
            return ArgumentsMismatch(self.scope, self.key, self.owner)
        return FunctionKeyMismatch(self.scope, self.key, self.owner)

    def complete(self, claim: Claim, response: Any) -> bool:
        try:
            done = step(
                "complete",
                self,
                self.store.complete,
                self.scope,
                self.key,
                fence=claim.fence,
                response=response,
                ttl=self.ttl,
                fingerprint=self.fingerprint,
            )
        except StoreUnavailable:
            # the call ran: return its result. Its claim ends with its lease (a repeat
            # after that runs it again; atomic mode's commit fails with the store instead).
            logger.warning(
                "idempotency: %s ran but its result could not be stored (store unreachable)",
                log_ref(self.scope, self.key),
            )
            return False
        if not done:
            self.stale(claim, "completion")
        return done

    def release(self, claim: Claim, reason: BaseException | None = None) -> bool:
        if self.atomic:
            # the claim is part of the open transaction: rolling it back releases the key
            # (no SQL: after a database error the transaction can run none)
            using = self.store.using  # type: ignore[attr-defined]
            step("release", self, transaction.set_rollback, True, using=using)
            self.released(reason)
            return True
        try:
            released = step(
                "release", self, self.store.release, self.scope, self.key, fence=claim.fence
            )
        except Exception:
            # the caller re-raises its own error; a store outage must not hide it
            logger.exception("idempotency: could not release %s", log_ref(self.scope, self.key))
            return False
        if released:
            self.released(reason)
        else:
            self.stale(claim, "release")
        return released

    def released(self, reason: BaseException | None) -> None:
        signals.released.send(
            sender=type(self.store), request=None, scope=self.scope, key=self.key, exception=reason
        )

    def stale(self, claim: Claim, what: str) -> None:
        logger.warning(
            "idempotency: the %s of %s by %s was refused: its lease ran out and another "
            "caller took the key over (fence %s). Raise the lease above the work's longest "
            "run time.",
            what,
            log_ref(self.scope, self.key),
            self.owner,
            claim.fence,
        )
        signals.stale_owner.send(
            sender=type(self.store),
            request=None,
            scope=self.scope,
            key=self.key,
            fence=claim.fence,
        )


def _free(seen: Claim | None) -> bool:
    """Whether a looked-up state means the key can be claimed (released, or lease over)."""
    return seen is None or lease_over(seen)


def _first_state(call: KeyedCall) -> Claim:
    """Where the store reads a live record more cheaply than a claim that meets one
    (``lookup_before_claim``: the database, whose claim that meets a record needs a
    second statement to read it), look first: a repeat then costs one lookup."""
    if call.store.lookup_before_claim:
        seen = call.lookup()
        if not _free(seen):
            return cast(Claim, seen)
    return call.claim()


def acquire(call: KeyedCall) -> Claim:
    """Claim ``call``'s key, waiting up to ``call.wait`` seconds for a running owner.

    Returns a CLAIMED, COMPLETED or (the wait ran out) IN_PROGRESS claim; raises
    :class:`FunctionKeyMismatch` or :class:`ArgumentsMismatch`.
    """
    backoff = Backoff(call.wait)
    claim = _first_state(call)
    while True:
        if claim.status is ClaimStatus.MISMATCH:
            if not call.adopts(claim):
                raise call.mismatch(claim)
            claim = call.claim()
            continue
        if claim.status is not ClaimStatus.IN_PROGRESS or not backoff.pause():
            return claim
        seen = call.lookup()
        # released, or its owner's lease ran out: try to own it; else keep watching
        claim = call.claim() if _free(seen) else cast(Claim, seen)


async def aacquire(call: KeyedCall) -> Claim:
    """:func:`acquire` for async callers: store calls in a thread, waits on the event loop."""
    claim_async = sync_to_async(call.claim)
    lookup_async = sync_to_async(call.lookup)
    backoff = Backoff(call.wait)
    claim = await sync_to_async(_first_state)(call)
    while True:
        if claim.status is ClaimStatus.MISMATCH:
            if not call.adopts(claim):
                raise call.mismatch(claim)
            claim = await claim_async()
            continue
        if claim.status is not ClaimStatus.IN_PROGRESS or not await backoff.apause():
            return claim
        seen = await lookup_async()
        claim = await claim_async() if _free(seen) else cast(Claim, seen)


def replayed(call: KeyedCall, claim: Claim) -> Any:
    """The stored result of a completed key (a stored exception is raised)."""
    expires = claim.expires_at
    record = ReplayedRecord(
        scope=call.scope,
        key=call.key,
        owner=call.owner,
        expires_at=None if expires is None else datetime.fromtimestamp(expires, UTC),
    )
    if signals.heard(signals.replayed):
        signals.replayed.send(
            sender=type(call.store),
            request=None,
            scope=call.scope,
            key=call.key,
            record=record,
            expires_at=record.expires_at,
        )
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "idempotency: %s already done; returning its stored result",
            log_ref(call.scope, call.key),
        )
    try:
        result = step("replay", call, call.codec.decode, claim.response)
    except UnreadableResult as exc:
        # forged or damaged: never rebuilt into an undeclared class, never run again
        raise unreadable_record(type(call.store).__name__, call.scope, call.key, str(exc)) from exc
    if call.on_replay is not None:
        result = call.on_replay(result, record)
    return result


def finish(call: KeyedCall, claim: Claim, result: Any) -> Any:
    """Store ``result`` under the claimed key and return what a replay will return."""
    try:
        response = call.codec.encode(result)
        again = call.codec.decode(response)
    except (TypeError, ValueError) as exc:
        call.release(claim, exc)
        raise
    call.complete(claim, response)
    return again


def fail(call: KeyedCall, claim: Claim, exc: BaseException) -> None:
    """The body raised ``exc``: store it (``store_errors``) or release the key.

    In atomic mode the transaction rolls back with the body's writes; the exception is
    stored after that (:func:`store_failure`), so a repeat raises it without running."""
    storable = call.store_errors and storable_error(exc)
    if storable and call.atomic:
        call.failed = cast(Exception, exc)
    elif storable:
        call.complete(claim, call.codec.encode_error(exc))
        return
    call.release(claim, exc)


def store_failure(call: KeyedCall) -> None:
    """Atomic mode: store the exception of a rolled-back call (``store_errors``)."""
    exc, call.failed = call.failed, None
    if exc is None:
        return
    inserted = step(
        "complete",
        call,
        call.store.insert_completed,  # type: ignore[attr-defined]
        call.scope,
        call.key,
        fingerprint=call.fingerprint,
        response=call.codec.encode_error(exc),
        ttl=call.ttl,
        method=call.method,
        route=call.owner,
    )
    if not inserted:
        logger.warning("idempotency: %s: its error was not stored", log_ref(call.scope, call.key))


def run(call: KeyedCall, body: Callable[[], Any]) -> Any:
    """Run ``body`` under ``call``'s key: replay, refuse (in progress), or run and store."""
    try:
        with call.store.atomic() if call.atomic else nullcontext():
            claim = acquire(call)
            if claim.status is ClaimStatus.COMPLETED:
                return replayed(call, claim)
            if claim.status is not ClaimStatus.CLAIMED:
                raise call.in_progress()
            try:
                with keep_call_alive(call, claim):
                    result = body()
            except BaseException as exc:
                fail(call, claim, exc)
                raise
            return finish(call, claim, result)
    finally:
        store_failure(call)


async def arun(call: KeyedCall, body: Callable[[], Awaitable[Any]]) -> Any:
    """:func:`run` for async bodies (lease mode)."""
    claim = await aacquire(call)
    if claim.status is ClaimStatus.COMPLETED:
        return await sync_to_async(replayed)(call, claim)
    if claim.status is not ClaimStatus.CLAIMED:
        raise call.in_progress()
    try:
        with keep_call_alive(call, claim):
            result = await body()
    except BaseException as exc:
        await sync_to_async(fail)(call, claim, exc)
        raise
    return await sync_to_async(finish)(call, claim, result)
