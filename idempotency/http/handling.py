"""The request flow every HTTP interface shares (decorator, mixin, middleware).

1. Only unsafe methods with a key take part; the key is parsed strictly.
2. The scope comes from the authenticated caller (this runs after DRF's
   ``initial()``: authentication, permissions and throttles have passed).
3. **Atomic mode** (DatabaseStore): look the key up (a replay needs nothing
   more); if absent, open one transaction for the view's writes, *claim the key
   in it before the view runs*, run the view and store its response in the same
   transaction. A concurrent duplicate's claim waits on the unique index until
   the first commits, then replays it; it never runs the view. A released
   outcome (5xx, exception) rolls the claim back with the view's writes.
   ``claim="optimistic"`` runs the view first and inserts the completed record
   at the end (one statement less), for views whose every effect is in that
   transaction: concurrent duplicates may then run the view, and all but one
   roll back.
4. **Lease mode** (any store): claim first (committed, with a lease and a
   fencing token), run the view, then complete or release with the token.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.core.exceptions import RequestDataTooBig
from django.db import IntegrityError, OperationalError, connections, transaction
from django.http import HttpRequest, HttpResponseBase

from idempotency import signals
from idempotency.backoff import Backoff
from idempotency.conf import idempotency_settings
from idempotency.exceptions import (
    IdempotencyError,
    IdempotencyKeyMismatch,
    IdempotencyKeyRequired,
    IdempotencyRequestInProgress,
    IdempotencyScopeUnavailable,
    InvalidIdempotencyKey,
    StoreUnavailable,
)
from idempotency.http.keys import header_value, parse_key
from idempotency.http.policy import Policy
from idempotency.http.responses import acapture, capture, is_storable, replay
from idempotency.problems import problem_response
from idempotency.stores import record_digest
from idempotency.stores.base import BaseStore, Claim, ClaimStatus, StoredResponse

logger = logging.getLogger("idempotency")

P = ParamSpec("P")
T = TypeVar("T")

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Call = Callable[[], HttpResponseBase]
Convert = Callable[[Exception], HttpResponseBase]
Finalize = Callable[[HttpResponseBase], HttpResponseBase]


def _identity(response: HttpResponseBase) -> HttpResponseBase:
    return response


class _LostRace(Exception):
    """Atomic mode: a concurrent duplicate committed the key first."""


class _NotOwner(Exception):
    """Atomic mode, claim first: the key is held by a live record; answer from it."""

    def __init__(self, claim: Claim) -> None:
        super().__init__()
        self.claim = claim


@dataclass
class IdempotencyContext:
    """What a view can see of its key: ``request.idempotency``.

    In lease mode a view with multi-step work records committed phases with
    :meth:`save_recovery_point`; a retry after a crash or an error starts with
    :attr:`recovery_point` set to the last one and resumes from there.
    """

    scope: str
    key: str
    fingerprint: str
    mode: str
    store: BaseStore
    fence: int = 0
    recovery_point: str = ""
    recovery_data: Any = None
    #: Lease mode: this attempt took the key over from an owner whose lease ran out. That
    #: owner may have crashed *after* its effect and before its record (an effect in the
    #: application's database cannot commit with a record in Redis): make the effect
    #: itself idempotent, e.g. with a unique constraint on :attr:`reference`.
    taken_over: bool = False

    @property
    def reference(self) -> str:
        """A stable reference of (scope, key), the same on every attempt and retry:
        ``idem_`` and 40 hex digits. Store it under a unique constraint of the view's own
        (a ledger reference, a payment number) so an effect happens once even when its
        idempotency record was lost."""
        return f"idem_{record_digest(self.scope, self.key)}"

    def save_recovery_point(self, name: str, data: Any = None) -> None:
        if self.mode != "lease":
            raise RuntimeError("Recovery points need lease mode (atomic mode rolls back whole).")
        if not self.store.save_recovery_point(
            self.scope, self.key, fence=self.fence, name=name, data=data
        ):
            from idempotency.exceptions import StaleOwner

            raise StaleOwner(f"{self.scope}/{self.key} is no longer owned by this request")
        self.recovery_point = name
        self.recovery_data = data


@dataclass
class Prepared:
    request: HttpRequest
    policy: Policy
    store: BaseStore
    mode: str
    scope: str
    key: str
    fingerprint: str
    #: Seconds the store took to decide who owns the key (lookup or claim).
    claim_seconds: float | None = None


def route_of(request: HttpRequest) -> str:
    """The URL pattern that matched ``request`` (bounded, unlike the path), for metrics."""
    match = getattr(request, "resolver_match", None)
    return str(match.route) if match is not None and match.route else "<unmatched>"


def _send(signal: Any, prepared: Prepared, **extra: Any) -> None:
    signal.send(
        sender=type(prepared.store),
        request=prepared.request,
        scope=prepared.scope,
        key=prepared.key,
        route=route_of(prepared.request),
        claim_seconds=prepared.claim_seconds,
        **extra,
    )


def _timed(prepared: Prepared, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``call(*args, **kwargs)``, its duration added to ``prepared.claim_seconds``."""
    started = time.perf_counter()
    try:
        return call(*args, **kwargs)
    finally:
        elapsed = time.perf_counter() - started
        prepared.claim_seconds = (prepared.claim_seconds or 0.0) + elapsed


def prepare(request: HttpRequest, policy: Policy) -> Prepared | HttpResponseBase | None:
    """Decide whether the request takes part: None to run the view plainly, a response
    for an error, or the prepared key, scope and fingerprint."""
    if request.method not in UNSAFE_METHODS:
        return None
    try:
        key = parse_key(header_value(request, idempotency_settings.HEADER))
        if key is None:
            if policy.get_required():
                raise IdempotencyKeyRequired(
                    f"This endpoint requires an {idempotency_settings.HEADER} header."
                )
            return None
        scope = policy.get_scope(request)
        if scope is None:
            if idempotency_settings.ANONYMOUS == "ignore":
                return None
            raise IdempotencyScopeUnavailable()
        fingerprint = policy.get_fingerprint(request)
    except (InvalidIdempotencyKey, IdempotencyKeyRequired, IdempotencyScopeUnavailable) as exc:
        if not isinstance(exc, IdempotencyScopeUnavailable):
            signals.invalid_key.send(
                sender=None,
                request=request,
                scope=None,
                key=None,
                code=exc.code,
                route=route_of(request),
                claim_seconds=None,
            )
        return exc.as_response()
    except RequestDataTooBig:
        return problem_response(
            413,
            "payload-too-large",
            "Payload too large",
            "The request body is larger than the server accepts.",
        )
    store = policy.get_store()
    return Prepared(
        request=request,
        policy=policy,
        store=store,
        mode=policy.get_mode(store),
        scope=scope,
        key=key,
        fingerprint=fingerprint,
    )


def answer(prepared: Prepared, claim: Claim) -> HttpResponseBase:
    """The response to a request that does not own the key."""
    if claim.status is ClaimStatus.COMPLETED and claim.response is not None:
        _send(signals.replayed, prepared)
        return replay(claim.response)
    if claim.status is ClaimStatus.MISMATCH:
        _send(signals.mismatch, prepared)
        return IdempotencyKeyMismatch().as_response()
    _send(signals.conflict, prepared)
    retry_after = max(int(idempotency_settings.RETRY_AFTER), math.ceil(claim.retry_after or 0))
    return IdempotencyRequestInProgress(retry_after=min(retry_after, 60)).as_response()


def _poll(prepared: Prepared, wait: float) -> Claim | None:
    """Wait up to ``wait`` seconds for an in-progress request; the final state seen."""
    backoff = Backoff(wait)
    claim: Claim | None = None
    while backoff.pause():
        claim = prepared.store.lookup(
            prepared.scope, prepared.key, fingerprint=prepared.fingerprint
        )
        if claim is None or claim.status is not ClaimStatus.IN_PROGRESS:
            return claim
    return claim


def bound_lock_waits(store: Any) -> None:
    """Atomic mode: cap lock waits in this transaction at ``LOCK_TIMEOUT`` (PostgreSQL).

    A concurrent duplicate that would wait longer for the first request's commit then
    answers 409 with ``Retry-After`` instead. Off by default: it costs one statement per
    request, and it also bounds the view's own lock waits on rows other requests hold.
    """
    timeout = idempotency_settings.LOCK_TIMEOUT
    if timeout is None:
        return
    connection = connections[store.using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('lock_timeout', %s, true)", [f"{int(timeout * 1000)}ms"]
            )


def _is_lock_error(exc: OperationalError) -> bool:
    cause = exc.__cause__
    code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if code in {"55P03", "40P01", "40001"}:  # lock_not_available, deadlock, serialization
        return True
    return "database is locked" in str(exc)


def run(
    request: HttpRequest,
    call: Call,
    policy: Policy,
    *,
    convert: Convert | None = None,
    finalize: Finalize = _identity,
) -> HttpResponseBase:
    """Run ``call`` (the view) under the idempotency contract.

    ``convert`` turns an exception of the view into a response (DRF's
    ``handle_exception``) or re-raises it; ``finalize`` renders a response
    so its bytes can be stored (DRF's ``finalize_response`` + ``render``).
    """
    prepared = prepare(request, policy)
    if prepared is None:
        return call()
    if isinstance(prepared, HttpResponseBase):
        return prepared
    started = False

    def view() -> HttpResponseBase:
        nonlocal started
        started = True
        return call()

    try:
        if prepared.mode == "atomic":
            return _run_atomic(prepared, view, convert, finalize)
        return _run_lease(prepared, view, convert, finalize)
    except StoreUnavailable as exc:
        if started:  # never run a view twice: its attempt ended with the store gone
            return exc.as_response()
        return _unavailable(prepared, exc, call)


def _unavailable(prepared: Prepared, exc: StoreUnavailable, call: Call) -> HttpResponseBase:
    """The store could not be reached before the view ran: 503, or run it unprotected."""
    if prepared.policy.get_on_store_unavailable() != "run":
        return exc.as_response()
    logger.warning(
        "idempotency: store unreachable; running %s %s without idempotency (on_store_unavailable)",
        prepared.request.method,
        prepared.request.path,
    )
    return call()


def _store_response(prepared: Prepared, response: HttpResponseBase) -> StoredResponse | None:
    """What to keep of ``response``, or None when its outcome releases the key."""
    if not is_storable(response.status_code, store_errors=prepared.policy.get_store_errors()):
        return None
    return capture(response, limit=idempotency_settings.MAX_RESPONSE_BYTES)


@contextmanager
def _transaction(prepared: Prepared) -> Iterator[list[str]]:
    """Atomic mode's transaction: the store's database and every alias the view names
    (``databases``), so a rollback leaves nothing behind in any of them."""
    aliases = prepared.policy.get_databases(prepared.store.using)  # type: ignore[attr-defined]
    with ExitStack() as stack:
        for alias in aliases:
            stack.enter_context(transaction.atomic(using=alias))
        yield aliases


def _roll_back(aliases: list[str]) -> None:
    for alias in aliases:
        transaction.set_rollback(True, using=alias)


def _run_atomic(
    prepared: Prepared, call: Call, convert: Convert | None, finalize: Finalize
) -> HttpResponseBase:
    store: Any = prepared.store
    optimistic = prepared.policy.get_claim() == "optimistic"
    # claim first answers for any record a peek misses; insert-last must see them all
    look = store.lookup if optimistic else store.peek
    existing = _timed(
        prepared, look, prepared.scope, prepared.key, fingerprint=prepared.fingerprint
    )
    if existing is not None and not _abandoned(existing):
        return _answer_waiting(prepared, existing)
    if optimistic:
        return _run_optimistic(prepared, call, convert, finalize)
    request = prepared.request
    context = IdempotencyContext(
        prepared.scope, prepared.key, prepared.fingerprint, "atomic", store
    )
    request.idempotency = context  # type: ignore[attr-defined]
    released: int | None = None
    try:
        with _transaction(prepared) as aliases:
            claim = _timed(prepared, _claim_in_transaction, prepared)
            if not claim.owned:
                raise _NotOwner(claim)  # nothing written: the transaction ends empty
            context.fence = claim.fence
            response = finalize(call())
            stored = _store_response(prepared, response)
            if stored is None:
                # released: nothing of this attempt may stay, or a retry would double it
                _roll_back(aliases)
                released = response.status_code
            elif not store.complete(
                prepared.scope,
                prepared.key,
                fence=claim.fence,
                response=stored,
                ttl=prepared.policy.get_ttl(),
                fingerprint=prepared.fingerprint,
            ):  # pragma: no cover - the claim is ours until this transaction ends
                raise _LostRace
    except _NotOwner as lost:
        return _answer_waiting(prepared, lost.claim)
    except _ClaimLocked:
        return answer(prepared, Claim(ClaimStatus.IN_PROGRESS, retry_after=1.0))
    except Exception as exc:
        return _atomic_failure(prepared, exc, convert, finalize, claimed_first=True)
    if released is not None:
        _send(signals.released, prepared, status=released)
    else:
        _send(signals.first, prepared, status=response.status_code)
    return response


def _abandoned(claim: Claim) -> bool:
    """An in-progress record whose lease ran out: the next claim takes it over."""
    return claim.status is ClaimStatus.IN_PROGRESS and claim.retry_after <= 0


def _answer_waiting(prepared: Prepared, claim: Claim) -> HttpResponseBase:
    """Answer from a record someone else holds, after waiting up to ``wait`` for it."""
    if claim.status is ClaimStatus.IN_PROGRESS and prepared.policy.get_wait() > 0:
        claim = _poll(prepared, prepared.policy.get_wait()) or claim
    return answer(prepared, claim)


class _ClaimLocked(Exception):
    """Atomic mode: the claim waited ``LOCK_TIMEOUT`` on a concurrent duplicate's claim."""


def _claim_in_transaction(prepared: Prepared) -> Claim:
    """Claim the key inside the open transaction; on PostgreSQL with ``LOCK_TIMEOUT`` the
    wait on a concurrent duplicate's claim is bounded (and only that wait: the bound is
    lifted again before the view runs, so the view's own lock waits are its own)."""
    store: Any = prepared.store
    request = prepared.request

    def claim() -> Claim:
        claimed: Claim = store.claim(
            prepared.scope,
            prepared.key,
            fingerprint=prepared.fingerprint,
            lease=prepared.policy.get_lease(),
            ttl=prepared.policy.get_ttl(),
            method=request.method or "",
            route=request.path,
        )
        return claimed

    timeout = idempotency_settings.LOCK_TIMEOUT
    connection = connections[store.using]
    if timeout is None or connection.vendor != "postgresql":
        return claim()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)",
            [f"{max(1, int(timeout * 1000))}ms"],
        )
        previous = cursor.fetchone()[0]
    try:
        claimed = claim()
    except OperationalError as exc:
        if _is_lock_error(exc):
            raise _ClaimLocked from exc
        raise
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])
    return claimed


def _run_optimistic(
    prepared: Prepared, call: Call, convert: Convert | None, finalize: Finalize
) -> HttpResponseBase:
    """Atomic mode, ``claim="optimistic"``: run the view, insert the completed record last."""
    store: Any = prepared.store
    request = prepared.request
    request.idempotency = IdempotencyContext(  # type: ignore[attr-defined]
        prepared.scope, prepared.key, prepared.fingerprint, "atomic", store
    )
    released: int | None = None
    try:
        with _transaction(prepared) as aliases:
            bound_lock_waits(store)
            response = finalize(call())
            stored = _store_response(prepared, response)
            if stored is None:
                _roll_back(aliases)
                released = response.status_code
            elif not _insert_completed(prepared, stored):
                raise _LostRace
    except Exception as exc:
        return _atomic_failure(prepared, exc, convert, finalize, claimed_first=False)
    if released is not None:
        _send(signals.released, prepared, status=released)
    else:
        _send(signals.first, prepared, status=response.status_code)
    return response


def _insert_completed(prepared: Prepared, stored: StoredResponse) -> bool:
    """Atomic mode: insert the completed record in the open transaction (False: taken)."""
    request = prepared.request
    inserted: bool = prepared.store.insert_completed(  # type: ignore[attr-defined]
        prepared.scope,
        prepared.key,
        fingerprint=prepared.fingerprint,
        response=stored,
        ttl=prepared.policy.get_ttl(),
        method=request.method or "",
        route=request.path,
    )
    return inserted


def _atomic_failure(
    prepared: Prepared,
    exc: Exception,
    convert: Convert | None,
    finalize: Finalize,
    *,
    claimed_first: bool,
) -> HttpResponseBase:
    """Atomic mode: the transaction rolled back; answer for the winner, or for the error.

    With the claim taken first, no duplicate can have run: an ``IntegrityError`` or a
    lock error is the view's own failure, never a lost race, and is answered as such.
    """
    store: Any = prepared.store
    if not claimed_first:
        lost = isinstance(exc, _LostRace | IntegrityError)
        locked = isinstance(exc, OperationalError) and _is_lock_error(exc)
        if lost or locked:
            # a committed duplicate won the key (our insert, or the view's own unique insert)
            winner = store.lookup(prepared.scope, prepared.key, fingerprint=prepared.fingerprint)
            if winner is not None:
                return answer(prepared, winner)
            if not isinstance(exc, IntegrityError):
                return answer(prepared, Claim(ClaimStatus.IN_PROGRESS, retry_after=1.0))
    if isinstance(exc, IdempotencyError):
        _send(signals.released, prepared, exception=exc)
        return exc.as_response()
    if convert is None:
        _send(signals.released, prepared, exception=exc)
        raise exc
    response = finalize(convert(exc))
    stored = _store_response(prepared, response)
    if stored is None:
        _send(signals.released, prepared, exception=exc)
        return response
    # a definitive error (a 4xx the view raised): stored, so a retry replays it
    with store.atomic():
        inserted = _insert_completed(prepared, stored)
    if not inserted:
        winner = store.lookup(prepared.scope, prepared.key, fingerprint=prepared.fingerprint)
        if winner is not None:
            return answer(prepared, winner)
    else:
        _send(signals.first, prepared, status=response.status_code)
    return response


def _claim(prepared: Prepared) -> Claim | HttpResponseBase:
    """Lease mode: own the key, or the response for a caller that does not."""
    policy = prepared.policy
    request = prepared.request
    if prepared.store.lookup_before_claim:
        seen = _timed(
            prepared,
            prepared.store.peek,
            prepared.scope,
            prepared.key,
            fingerprint=prepared.fingerprint,
        )
        waits = (
            seen is not None and seen.status is ClaimStatus.IN_PROGRESS and policy.get_wait() > 0
        )
        if seen is not None and not _abandoned(seen) and not waits:
            return answer(prepared, seen)
    for _attempt in range(3):
        claim = _timed(
            prepared,
            prepared.store.claim,
            prepared.scope,
            prepared.key,
            fingerprint=prepared.fingerprint,
            lease=policy.get_lease(),
            ttl=policy.get_ttl(),
            method=request.method or "",
            route=request.path,
        )
        if claim.owned:
            return claim
        if claim.status is ClaimStatus.IN_PROGRESS and policy.get_wait() > 0:
            seen = _poll(prepared, policy.get_wait())
            if seen is None:
                continue  # released while we waited: try to own it
            return answer(prepared, seen)
        return answer(prepared, claim)
    return answer(prepared, Claim(ClaimStatus.IN_PROGRESS, retry_after=1.0))


def _finish(prepared: Prepared, claim: Claim, response: HttpResponseBase) -> HttpResponseBase:
    return _record(prepared, claim, response, _store_response(prepared, response))


def _record(
    prepared: Prepared, claim: Claim, response: HttpResponseBase, stored: StoredResponse | None
) -> HttpResponseBase:
    """Lease mode: complete the key with ``stored``, or release it when that is None."""
    store = prepared.store
    if stored is not None:
        try:
            completed = store.complete(
                prepared.scope,
                prepared.key,
                fence=claim.fence,
                response=stored,
                ttl=prepared.policy.get_ttl(),
                fingerprint=prepared.fingerprint,
            )
        except StoreUnavailable:
            # the view ran: answer what it did. Its claim stays until its lease ends, and
            # a retry after that runs it again (its effects need their own unique keys).
            logger.warning(
                "idempotency: %s/%s ran but its response could not be stored (store "
                "unreachable); a retry after the lease runs it again",
                prepared.scope,
                prepared.key,
            )
            return response
        if not completed:
            _send(signals.stale_owner, prepared, fence=claim.fence)
        else:
            _send(signals.first, prepared, status=response.status_code)
    else:
        _abort(prepared, claim, status=response.status_code)
    return response


def _abort(prepared: Prepared, claim: Claim, **extra: Any) -> None:
    try:
        released = prepared.store.release(prepared.scope, prepared.key, fence=claim.fence)
    except StoreUnavailable:
        return  # the claim ends with its lease; the view's own outcome is what counts
    if released:
        _send(signals.released, prepared, **extra)
    else:
        _send(signals.stale_owner, prepared, fence=claim.fence)


def _context(prepared: Prepared, claim: Claim) -> IdempotencyContext:
    return IdempotencyContext(
        prepared.scope,
        prepared.key,
        prepared.fingerprint,
        "lease",
        prepared.store,
        fence=claim.fence,
        recovery_point=claim.recovery_point,
        recovery_data=claim.recovery_data,
        taken_over=claim.taken_over,
    )


def _run_lease(
    prepared: Prepared, call: Call, convert: Convert | None, finalize: Finalize
) -> HttpResponseBase:
    try:
        claim = _claim(prepared)
    except StoreUnavailable:
        raise  # answered (or run unprotected, where the view opts out) by run()
    except IdempotencyError as exc:  # e.g. StoreNotDurable: the claim did not hold
        return exc.as_response()
    if isinstance(claim, HttpResponseBase):
        return claim
    prepared.request.idempotency = _context(prepared, claim)  # type: ignore[attr-defined]
    try:
        try:
            response = finalize(call())
        except IdempotencyError as exc:
            response = exc.as_response()
        except Exception as exc:
            if convert is None:
                raise
            response = finalize(convert(exc))
    except BaseException as exc:
        _abort(prepared, claim, exception=exc)
        raise
    return _finish(prepared, claim, response)


async def run_async(
    request: HttpRequest, call: Callable[[], Awaitable[HttpResponseBase]], policy: Policy
) -> HttpResponseBase:
    """Async views: lease mode (a database transaction cannot span an ``await``)."""
    if policy.mode == "atomic":
        from idempotency.exceptions import ImproperlyApplied

        raise ImproperlyApplied("Async views cannot use atomic mode; use mode='lease'.")
    lease_policy = policy.merged(mode="lease") if policy.mode is None else policy
    prepared = await sync_to_async(prepare)(request, lease_policy)
    if prepared is None:
        return await call()
    if isinstance(prepared, HttpResponseBase):
        return prepared
    prepared.mode = "lease"
    try:
        claim = await sync_to_async(_claim)(prepared)
    except StoreUnavailable as exc:
        if prepared.policy.get_on_store_unavailable() != "run":
            return exc.as_response()
        return await call()
    except IdempotencyError as exc:
        return exc.as_response()
    if isinstance(claim, HttpResponseBase):
        return claim
    request.idempotency = _context(prepared, claim)  # type: ignore[attr-defined]
    try:
        response = await call()
    except IdempotencyError as exc:
        response = exc.as_response()
    except BaseException as exc:
        await sync_to_async(_abort)(prepared, claim, exception=exc)
        raise
    stored = None
    if is_storable(response.status_code, store_errors=prepared.policy.get_store_errors()):
        stored = await acapture(response, limit=idempotency_settings.MAX_RESPONSE_BYTES)
    return await sync_to_async(_record)(prepared, claim, response, stored)


__all__ = [
    "UNSAFE_METHODS",
    "IdempotencyContext",
    "run",
    "run_async",
]
