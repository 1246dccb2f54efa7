"""Atomic mode (DatabaseStore): the record commits in the view's own transaction.

The key is claimed inside that transaction before the view runs (or, with
``claim="optimistic"``, the completed record is inserted after it), so a released
outcome rolls the claim back with the view's writes.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, cast

from django.db import DatabaseError, IntegrityError, OperationalError, connections, transaction
from django.http import HttpResponseBase

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.exceptions import IdempotencyError
from idempotency.http.flow import (
    Call,
    Convert,
    Finalize,
    Prepared,
    abandoned,
    answer,
    answer_to_exception,
    answer_waiting,
    bind,
    over_quota,
    send,
    store_response,
    timed,
)
from idempotency.outages import is_deadlock, is_lock_error
from idempotency.stores.base import Claim, ClaimStatus, StoredResponse
from idempotency.stores.database import DatabaseStore
from idempotency.stores.savepoints import batched_releases
from idempotency.tracing import step


class _LostRace(Exception):
    """Atomic mode: a concurrent duplicate committed the key first."""


class _NotOwner(Exception):
    """Atomic mode, claim first: the key is held by a live record; answer from it."""

    def __init__(self, claim: Claim) -> None:
        super().__init__()
        self.claim = claim


class _ClaimLocked(Exception):
    """Atomic mode: the claim's lock wait on a concurrent duplicate's claim ended without
    the lock: ``LOCK_TIMEOUT`` (or the server's own bound) ran out, or (``deadlock``) the
    server chose it as a deadlock's victim."""

    def __init__(self, *, deadlock: bool = False) -> None:
        super().__init__()
        self.deadlock = deadlock


#: Attempts of an atomic-mode claim chosen as a deadlock's victim. On MySQL/MariaDB the
#: duplicates waiting on a claim whose transaction rolls back (a released outcome) meet
#: on the freed gap of the unique index, and InnoDB rolls all but one back: the claim was
#: the transaction's first statement, so it starts again and finds the new owner.
CLAIM_ATTEMPTS = 3


def store_of(prepared: Prepared) -> DatabaseStore:
    """The store of an atomic-mode request: only a database store runs atomic mode
    (``Policy.get_mode`` refuses the others)."""
    return cast(DatabaseStore, prepared.store)


def _lock_timeout(store: DatabaseStore) -> str | None:
    """``LOCK_TIMEOUT`` as PostgreSQL's ``lock_timeout`` value for ``store``'s database,
    or None where it does not apply (not set, or not PostgreSQL)."""
    timeout = idempotency_settings.LOCK_TIMEOUT
    if timeout is None or connections[store.using].vendor != "postgresql":
        return None
    return f"{max(1, int(timeout * 1000))}ms"


def bound_lock_waits(store: DatabaseStore) -> None:
    """Atomic mode: cap lock waits in this transaction at ``LOCK_TIMEOUT`` (PostgreSQL).

    A concurrent duplicate that would wait longer for the first request's commit then
    answers 409 with ``Retry-After`` instead. Off by default: it costs one statement per
    request, and it also bounds the view's own lock waits on rows other requests hold.
    """
    timeout = _lock_timeout(store)
    if timeout is not None:
        with connections[store.using].cursor() as cursor:
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [timeout])


def _is_lock_error(exc: OperationalError) -> bool:
    return is_lock_error(exc)


@contextmanager
def _transaction(prepared: Prepared) -> Iterator[list[str]]:
    """Atomic mode's transaction: the store's database and every alias the view names
    (``databases``), so a rollback leaves nothing behind in any of them."""
    aliases = prepared.policy.get_databases(store_of(prepared).using)
    if len(aliases) == 1:
        with transaction.atomic(using=aliases[0]), batched_releases(aliases):
            yield aliases
        return
    with ExitStack() as stack:
        for alias in aliases:
            stack.enter_context(transaction.atomic(using=alias))
        stack.enter_context(batched_releases(aliases))
        yield aliases


def _roll_back(aliases: list[str]) -> None:
    for alias in aliases:
        transaction.set_rollback(True, using=alias)


def run_atomic(
    prepared: Prepared, call: Call, convert: Convert | None, finalize: Finalize
) -> HttpResponseBase:
    store = store_of(prepared)
    optimistic = prepared.policy.get_claim() == "optimistic"
    # claim first answers for any record a peek misses; insert-last must see them all
    look = store.lookup if optimistic else store.peek
    existing = timed(prepared, look, prepared.scope, prepared.key, fingerprint=prepared.fingerprint)
    if existing is not None and not abandoned(existing):
        return answer_waiting(prepared, existing)
    if existing is None and prepared.policy.get_max_new_records() is not None:
        if not optimistic and store.response_cache is not None:
            # the peek read only the response cache: a replay it missed is no new record
            existing = timed(
                prepared, store.lookup, prepared.scope, prepared.key,
                fingerprint=prepared.fingerprint,
            )  # fmt: skip
            if existing is not None and not abandoned(existing):
                return answer_waiting(prepared, existing)
        if existing is None:  # a new record: counted before its transaction opens
            refused = timed(prepared, over_quota, prepared)
            if refused is not None:
                return refused
    if optimistic:
        return _run_optimistic(prepared, call, convert, finalize)
    context = bind(prepared)
    # a deadlock's victim starts again only where its transaction is the outermost one
    # (under ATOMIC_REQUESTS the server rolled the request's own transaction back too)
    outermost = not connections[store.using].in_atomic_block
    for attempt in range(1, CLAIM_ATTEMPTS + 1):
        released: int | None = None
        try:
            with _transaction(prepared) as aliases:
                claim = timed(prepared, _claim_in_transaction, prepared)
                if not claim.owned:
                    raise _NotOwner(claim)  # nothing written: the transaction ends empty
                context.fence = claim.fence
                response = finalize(call())
                stored = store_response(prepared, response)
                if stored is None:
                    # released: nothing of this attempt may stay, or a retry would double it
                    _roll_back(aliases)
                    released = response.status_code
                elif not step(
                    "complete",
                    prepared,
                    store.complete,
                    prepared.scope,
                    prepared.key,
                    fence=claim.fence,
                    response=stored,
                    ttl=prepared.policy.get_ttl_for(response.status_code),
                    fingerprint=prepared.fingerprint,
                ):  # pragma: no cover - the claim is ours until this transaction ends
                    raise _LostRace
        except _NotOwner as lost:
            return answer_waiting(prepared, lost.claim)
        except _ClaimLocked as locked:
            if locked.deadlock and outermost and attempt < CLAIM_ATTEMPTS:
                continue  # the view never ran and the server rolled everything back
            return answer(prepared, Claim(ClaimStatus.IN_PROGRESS, retry_after=1.0))
        except Exception as exc:
            return _atomic_failure(prepared, exc, convert, finalize, claimed_first=True)
        return _committed(prepared, response, released)
    raise AssertionError("unreachable")  # pragma: no cover


def _claim_in_transaction(prepared: Prepared) -> Claim:
    """Claim the key inside the open transaction. With ``LOCK_TIMEOUT`` the wait on a
    concurrent duplicate's claim is bounded (and only that wait: the bound is lifted again
    before the view runs, so the view's own lock waits are its own): PostgreSQL's
    ``lock_timeout`` for this transaction, MySQL's ``innodb_lock_wait_timeout`` for the
    session (whole seconds), put back after the claim. A claim whose lock wait ends without
    the lock (that bound, the server's own, or a deadlock, whose victim's transaction
    MySQL has already rolled back) answers 409 with ``Retry-After``: the view never ran."""
    store = store_of(prepared)

    def claim() -> Claim:
        return store.claim(
            prepared.scope,
            prepared.key,
            fingerprint=prepared.fingerprint,
            lease=prepared.policy.get_lease(),
            ttl=prepared.policy.get_ttl(),
            method=prepared.method,
            route=prepared.path,
        )

    connection = connections[store.using]
    timeout = idempotency_settings.LOCK_TIMEOUT
    bound = timeout is not None and connection.vendor in {"postgresql", "mysql"}
    if bound and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)",
                [_lock_timeout(store)],
            )
            previous = cursor.fetchone()[0]
    elif bound:
        with connection.cursor() as cursor:
            cursor.execute(
                "SET @idempotency_lock_wait = @@SESSION.innodb_lock_wait_timeout,"
                " SESSION innodb_lock_wait_timeout = %s",
                [max(1, math.ceil(timeout))],
            )
    try:
        claimed = claim()
    except OperationalError as exc:
        if _is_lock_error(exc):
            raise _ClaimLocked(deadlock=is_deadlock(exc)) from exc
        raise
    finally:
        if bound and connection.vendor == "mysql":
            with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
                # a session setting: it would outlive the transaction on this connection
                cursor.execute("SET SESSION innodb_lock_wait_timeout = @idempotency_lock_wait")
    if bound and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])
    return claimed


def _run_optimistic(
    prepared: Prepared, call: Call, convert: Convert | None, finalize: Finalize
) -> HttpResponseBase:
    """Atomic mode, ``claim="optimistic"``: run the view, insert the completed record last."""
    store = store_of(prepared)
    bind(prepared)
    released: int | None = None
    try:
        with _transaction(prepared) as aliases:
            bound_lock_waits(store)
            response = finalize(call())
            stored = store_response(prepared, response)
            if stored is None:
                _roll_back(aliases)
                released = response.status_code
            elif not _insert_completed(prepared, stored, response.status_code):
                raise _LostRace
    except Exception as exc:
        return _atomic_failure(prepared, exc, convert, finalize, claimed_first=False)
    return _committed(prepared, response, released)


def _committed(
    prepared: Prepared, response: HttpResponseBase, released: int | None
) -> HttpResponseBase:
    """The view's transaction ended: signal its outcome (``released``: the status whose
    attempt was rolled back), then answer with the view's response."""
    if released is not None:
        _released(prepared, status=released)
    else:
        send(signals.stored, prepared, status=response.status_code)
    return response


def _released(prepared: Prepared, **extra: Any) -> None:
    """The view's transaction rolled back, and the claim with it: the key is free again
    (no store call: traced as ``idempotency.release`` around the signal)."""
    step("release", prepared, send, signals.released, prepared, **extra)


def _insert_completed(prepared: Prepared, stored: StoredResponse, status: int) -> bool:
    """Atomic mode: insert the completed record of a response with ``status`` in the open
    transaction (False: taken)."""
    return step(
        "complete",
        prepared,
        store_of(prepared).insert_completed,
        prepared.scope,
        prepared.key,
        fingerprint=prepared.fingerprint,
        response=stored,
        ttl=prepared.policy.get_ttl_for(status),
        method=prepared.method,
        route=prepared.path,
    )


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
    store = store_of(prepared)
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
        _released(prepared, exception=exc)
        return exc.as_response()
    answered = answer_to_exception(prepared, exc, convert, finalize)
    if answered is None:
        _released(prepared, exception=exc)
        raise exc
    response = answered
    stored = store_response(prepared, response)
    if stored is None:
        _released(prepared, exception=exc)
        return response
    # a definitive error (a 4xx the view raised): stored, so a retry replays it
    with store.atomic():
        inserted = _insert_completed(prepared, stored, response.status_code)
    if not inserted:
        winner = store.lookup(prepared.scope, prepared.key, fingerprint=prepared.fingerprint)
        if winner is not None:
            return answer(prepared, winner)
    else:
        send(signals.stored, prepared, status=response.status_code)
    return response
