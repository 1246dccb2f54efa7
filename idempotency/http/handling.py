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

This module is the entry (:func:`run`, :func:`run_async`); the shared steps live in
:mod:`~idempotency.http.flow`, the two modes in :mod:`~idempotency.http.atomic` and
:mod:`~idempotency.http.lease`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponseBase

from idempotency.exceptions import IdempotencyError, StoreMisconfigured, StoreUnavailable
from idempotency.http.atomic import run_atomic
from idempotency.http.flow import (
    Call,
    Convert,
    Finalize,
    Prepared,
    aprepare,
    identity,
    prepare,
)
from idempotency.http.lease import run_lease, run_lease_async
from idempotency.http.policy import Policy

logger = logging.getLogger("idempotency")


def run(
    request: HttpRequest,
    call: Call,
    policy: Policy,
    *,
    convert: Convert | None = None,
    finalize: Finalize = identity,
) -> HttpResponseBase:
    """Run ``call`` (the view) under the idempotency contract.

    ``convert`` turns an exception of the view into a response (DRF's
    ``handle_exception``) or re-raises it; ``finalize`` renders a response
    so its bytes can be stored (DRF's ``finalize_response`` + ``render``).
    """
    try:
        prepared = prepare(request, policy)
    except ImproperlyConfigured as exc:
        return misconfigured(request, exc)
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
            return run_atomic(prepared, view, convert, finalize)
        return run_lease(prepared, view, convert, finalize)
    except StoreUnavailable as exc:
        if started:  # never run a view twice: its attempt ended with the store gone
            return exc.as_response()
        return _unavailable(prepared, exc, call)
    except IdempotencyError as exc:
        if started:  # the view's own
            raise
        return exc.as_response()  # e.g. an unreadable record: nothing ran
    except ImproperlyConfigured as exc:
        if started:  # the view's own error
            raise
        return misconfigured(request, exc)


def misconfigured(request: HttpRequest, exc: ImproperlyConfigured) -> HttpResponseBase:
    """A store that cannot work as configured: log the cause, answer 503, never a bare 500."""
    logger.error(
        "idempotency: the store of %s %s is misconfigured: %s",
        request.method,
        request.path,
        exc,
        exc_info=exc,
    )
    return StoreMisconfigured().as_response()


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


async def run_async(
    request: HttpRequest, call: Callable[[], Awaitable[HttpResponseBase]], policy: Policy
) -> HttpResponseBase:
    """Async views: lease mode (a database transaction cannot span an ``await``)."""
    if policy.mode == "atomic":
        from idempotency.exceptions import ImproperlyApplied

        raise ImproperlyApplied("Async views cannot use atomic mode; use mode='lease'.")
    lease_policy = policy.merged(mode="lease") if policy.mode is None else policy
    try:
        prepared = await aprepare(request, lease_policy)
    except ImproperlyConfigured as exc:
        return misconfigured(request, exc)
    if prepared is None:
        return await call()
    if isinstance(prepared, HttpResponseBase):
        return prepared
    prepared.mode = "lease"
    started = False

    async def view() -> HttpResponseBase:
        nonlocal started
        started = True
        return await call()

    try:
        return await run_lease_async(prepared, view)
    except StoreUnavailable as exc:
        if started or prepared.policy.get_on_store_unavailable() != "run":
            return exc.as_response()
        return await call()
    except ImproperlyConfigured as exc:
        if started:
            raise
        return misconfigured(request, exc)


__all__ = ["run", "run_async"]
