"""Lease mode (any store): the claim commits first with a lease and a fencing token;
the view runs; the owner completes or releases the key with its token."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.exception import response_for_exception
from django.http import HttpResponseBase

from idempotency import signals
from idempotency.backoff import Backoff
from idempotency.conf import idempotency_settings
from idempotency.exceptions import IdempotencyError, StoreUnavailable
from idempotency.http.flow import (
    Call,
    Convert,
    Finalize,
    Prepared,
    abandoned,
    answer,
    answer_to_exception,
    bind,
    over_quota,
    poll,
    send,
    store_response,
    timed,
)
from idempotency.http.responses import akept, is_storable
from idempotency.keepalive import kept_alive
from idempotency.keyed import log_ref
from idempotency.stores.base import Claim, ClaimStatus, StoredResponse
from idempotency.tracing import step

logger = logging.getLogger("idempotency")


def claim_or_answer(prepared: Prepared) -> Claim | HttpResponseBase:
    """Lease mode: own the key, or the response for a caller that does not."""
    policy = prepared.policy
    if prepared.store.lookup_before_claim:
        seen = timed(
            prepared,
            prepared.store.peek,
            prepared.scope,
            prepared.key,
            fingerprint=prepared.fingerprint,
        )
        waits = (
            seen is not None and seen.status is ClaimStatus.IN_PROGRESS and policy.get_wait() > 0
        )
        if seen is not None and not abandoned(seen) and not waits:
            return answer(prepared, seen)
    for _attempt in range(3):
        claim = timed(
            prepared,
            prepared.store.claim,
            prepared.scope,
            prepared.key,
            fingerprint=prepared.fingerprint,
            lease=policy.get_lease(),
            ttl=policy.get_ttl(),
            method=prepared.method,
            route=prepared.path,
        )
        if claim.owned:
            return claim
        if claim.status is ClaimStatus.IN_PROGRESS and policy.get_wait() > 0:
            seen = poll(prepared, policy.get_wait())
            if seen is None:
                continue  # released while we waited: try to own it
            return answer(prepared, seen)
        return answer(prepared, claim)
    return answer(prepared, Claim(ClaimStatus.IN_PROGRESS, retry_after=1.0))


def _finish(prepared: Prepared, claim: Claim, response: HttpResponseBase) -> HttpResponseBase:
    return record(prepared, claim, response, store_response(prepared, response))


def record(
    prepared: Prepared, claim: Claim, response: HttpResponseBase, stored: StoredResponse | None
) -> HttpResponseBase:
    """Lease mode: complete the key with ``stored``, or release it when that is None."""
    store = prepared.store
    if stored is not None:
        try:
            completed = step(
                "complete",
                prepared,
                store.complete,
                prepared.scope,
                prepared.key,
                fence=claim.fence,
                response=stored,
                ttl=prepared.policy.get_ttl_for(response.status_code),
                fingerprint=prepared.fingerprint,
            )
        except StoreUnavailable:
            _not_stored(prepared)
            return response
        _recorded(prepared, claim, response, completed)
    else:
        abort(prepared, claim, status=response.status_code)
    return response


def _recorded(
    prepared: Prepared, claim: Claim, response: HttpResponseBase, completed: bool
) -> None:
    if not completed:
        send(signals.stale_owner, prepared, fence=claim.fence)
    else:
        send(signals.stored, prepared, status=response.status_code)


def _not_stored(prepared: Prepared) -> None:
    # the view ran: answer what it did. Its claim stays until its lease ends, and a retry
    # after that runs it again (its effects need their own unique keys).
    logger.warning(
        "idempotency: %s ran but its response could not be stored (store "
        "unreachable); a retry after the lease runs it again",
        log_ref(prepared.scope, prepared.key),
    )


def abort(prepared: Prepared, claim: Claim, **extra: Any) -> None:
    try:
        released = step(
            "release",
            prepared,
            prepared.store.release,
            prepared.scope,
            prepared.key,
            fence=claim.fence,
        )
    except StoreUnavailable:
        return  # the claim ends with its lease; the view's own outcome is what counts
    _released(prepared, claim, released, **extra)


def _released(prepared: Prepared, claim: Claim, released: bool, **extra: Any) -> None:
    if released:
        send(signals.released, prepared, **extra)
    else:
        send(signals.stale_owner, prepared, fence=claim.fence)


# -- async views: the same steps on the store's a* methods, on the event loop -----------


async def aclaim_or_answer(prepared: Prepared) -> Claim | HttpResponseBase:
    """:func:`claim_or_answer` on the event loop (the store's ``apeek``/``aclaim``)."""
    policy, store = prepared.policy, prepared.store
    started = time.perf_counter()
    try:
        if store.lookup_before_claim:
            seen = await store.apeek(prepared.scope, prepared.key, fingerprint=prepared.fingerprint)
            waits = (
                seen is not None
                and seen.status is ClaimStatus.IN_PROGRESS
                and policy.get_wait() > 0
            )
            if seen is not None and not abandoned(seen) and not waits:
                return await _aanswer(prepared, seen)
        for _attempt in range(3):
            claim = await store.aclaim(
                prepared.scope,
                prepared.key,
                fingerprint=prepared.fingerprint,
                lease=policy.get_lease(),
                ttl=policy.get_ttl(),
                method=prepared.method,
                route=prepared.path,
            )
            if claim.owned:
                return claim
            if claim.status is ClaimStatus.IN_PROGRESS and policy.get_wait() > 0:
                seen = await _apoll(prepared, policy.get_wait())
                if seen is None:
                    continue  # released while we waited: try to own it
                return await _aanswer(prepared, seen)
            return await _aanswer(prepared, claim)
        return answer(prepared, Claim(ClaimStatus.IN_PROGRESS, retry_after=1.0))
    finally:
        prepared.claim_seconds = (prepared.claim_seconds or 0.0) + time.perf_counter() - started


async def _aanswer(prepared: Prepared, claim: Claim) -> HttpResponseBase:
    if claim.status is ClaimStatus.MISMATCH:
        # may look the record up again under an older fingerprint (rare): in a thread
        return await sync_to_async(answer, thread_sensitive=False)(prepared, claim)
    return answer(prepared, claim)


async def _apoll(prepared: Prepared, wait: float) -> Claim | None:
    """:func:`~idempotency.http.flow.poll` on the event loop."""
    backoff = Backoff(wait)
    claim: Claim | None = None
    while await backoff.apause():
        claim = await prepared.store.alookup(
            prepared.scope, prepared.key, fingerprint=prepared.fingerprint
        )
        if claim is None or claim.status is not ClaimStatus.IN_PROGRESS:
            return claim
    return claim


async def aabort(prepared: Prepared, claim: Claim, **extra: Any) -> None:
    """:func:`abort` on the event loop."""
    try:
        released = await prepared.store.arelease(prepared.scope, prepared.key, fence=claim.fence)
    except StoreUnavailable:
        return
    _released(prepared, claim, released, **extra)


async def arecord(
    prepared: Prepared, claim: Claim, response: HttpResponseBase, stored: StoredResponse | None
) -> HttpResponseBase:
    """:func:`record` on the event loop."""
    if stored is None:
        await aabort(prepared, claim, status=response.status_code)
        return response
    try:
        completed = await prepared.store.acomplete(
            prepared.scope,
            prepared.key,
            fence=claim.fence,
            response=stored,
            ttl=prepared.policy.get_ttl_for(response.status_code),
            fingerprint=prepared.fingerprint,
        )
    except StoreUnavailable:
        _not_stored(prepared)
        return response
    _recorded(prepared, claim, response, completed)
    return response


def _over_quota(prepared: Prepared, claim: Claim) -> HttpResponseBase | None:
    """Lease mode: a new record (not a takeover) counts against ``MAX_NEW_RECORDS``; one
    over the limit gives its claim back and is answered 429."""
    if claim.taken_over:
        return None
    try:
        refused = over_quota(prepared)
    except BaseException:
        abort(prepared, claim)
        raise
    if refused is not None:
        abort(prepared, claim, status=refused.status_code)
    return refused


def _kept_alive(prepared: Prepared, claim: Claim) -> AbstractContextManager[object]:
    """The owner's lease renewed while its view runs (fenced by the claim's token)."""
    return kept_alive(
        prepared.store,
        prepared.scope,
        prepared.key,
        fence=claim.fence,
        lease=prepared.policy.get_lease(),
        owner=prepared.path,
    )


def run_lease(
    prepared: Prepared, call: Call, convert: Convert | None, finalize: Finalize
) -> HttpResponseBase:
    try:
        claim = claim_or_answer(prepared)
    except StoreUnavailable:
        raise  # answered (or run unprotected, where the view opts out) by run()
    except IdempotencyError as exc:  # e.g. StoreNotDurable: the claim did not hold
        return exc.as_response()
    if isinstance(claim, HttpResponseBase):
        return claim
    refused = _over_quota(prepared, claim)
    if refused is not None:
        return refused
    bind(prepared, claim)
    try:
        try:
            with _kept_alive(prepared, claim):
                response = finalize(call())
        except IdempotencyError as exc:
            response = exc.as_response()
        except Exception as exc:
            answered = answer_to_exception(prepared, exc, convert, finalize)
            if answered is None:
                raise
            response = answered
    except BaseException as exc:
        abort(prepared, claim, exception=exc)
        raise
    return _finish(prepared, claim, response)


async def run_lease_async(
    prepared: Prepared, call: Callable[[], Awaitable[HttpResponseBase]]
) -> HttpResponseBase:
    """:func:`run_lease` for async views: the same claim, record and release, on the
    store's ``a*`` methods; the view and the capture of an async stream on the event
    loop. Only ``MAX_NEW_RECORDS`` counting runs in a thread (not thread-sensitive)."""
    try:
        claim = await aclaim_or_answer(prepared)
    except StoreUnavailable:
        raise  # answered (or run unprotected, where the view opts out) by run_async()
    except IdempotencyError as exc:
        return exc.as_response()
    if isinstance(claim, HttpResponseBase):
        return claim
    if prepared.policy.get_max_new_records() is not None:
        refused = await sync_to_async(_over_quota, thread_sensitive=False)(prepared, claim)
        if refused is not None:
            return refused
    bind(prepared, claim)
    try:
        with _kept_alive(prepared, claim):
            response = await call()
    except IdempotencyError as exc:
        response = exc.as_response()
    except Exception as exc:
        if not prepared.policy.get_store_errors():
            await aabort(prepared, claim, exception=exc)
            raise
        # stored like the answer of a sync view (see flow.answer_to_exception)
        response = await sync_to_async(response_for_exception, thread_sensitive=False)(
            prepared.request, exc
        )
    except BaseException as exc:
        await aabort(prepared, claim, exception=exc)
        raise
    stored = None
    policy = prepared.policy
    if (
        is_storable(response.status_code, store_errors=policy.get_store_errors())
        and policy.get_ttl_for(response.status_code) > 0
    ):
        stored = await akept(
            response,
            limit=idempotency_settings.MAX_RESPONSE_BYTES,
            status_only=prepared.policy.get_status_only(),
            redact=prepared.policy.get_redact(),
        )
    return await arecord(prepared, claim, response, stored)
