"""The entry every HTTP interface calls (decorator, mixin, middleware, Ninja): run a
view under the idempotency contract.

1. :func:`~idempotency.http.requests.prepare` decides whether the request takes part
   and makes its job: the key (parsed strictly), the caller's scope, the fingerprint,
   the view's options.
2. The engine (:mod:`idempotency.core.engine`) claims the key, or answers from its
   record; runs the view; keeps or releases its response (atomic mode: in the view's
   own transaction), with :class:`~idempotency.http.answers.HttpAnswers` saying how.
3. Here: a store that cannot be reached before the view ran answers 503, or runs the
   view unprotected where it opts in (``on_store_unavailable="run"``); a view never
   runs twice in one request.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponseBase

from idempotency.conf import idempotency_settings
from idempotency.core import engine
from idempotency.core.job import Job
from idempotency.exceptions import (
    IdempotencyError,
    ImproperlyApplied,
    StoreMisconfigured,
    StoreUnavailable,
)
from idempotency.http.answers import Call, Convert, Finalize, HttpAnswers, identity
from idempotency.http.keys import header_value
from idempotency.http.options import Policy
from idempotency.http.requests import UNSAFE_METHODS, prepare
from idempotency.scopes import aload_user

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
        job = prepare(request, policy)
    except ImproperlyConfigured as exc:
        return misconfigured(request, exc)
    if job is None:
        return call()
    if isinstance(job, HttpResponseBase):
        return job
    answers = HttpAnswers(policy, convert, finalize)
    try:
        response: HttpResponseBase = engine.run(job, answers, lambda: finalize(call()))
    except Exception as exc:
        return _not_run(job, policy, exc, call)
    return response


async def run_async(
    request: HttpRequest, call: Callable[[], Awaitable[HttpResponseBase]], policy: Policy
) -> HttpResponseBase:
    """:func:`run` for async views: lease mode (a database transaction cannot span an
    ``await``); the store's async methods, the view on the event loop."""
    if policy.mode == "atomic":
        raise ImproperlyApplied("Async views cannot use atomic mode; use mode='lease'.")
    lease_policy = _in_lease_mode(policy)
    try:
        job = await aprepare(request, lease_policy)
    except ImproperlyConfigured as exc:
        return misconfigured(request, exc)
    if job is None:
        return await call()
    if isinstance(job, HttpResponseBase):
        return job
    job.mode = "lease"
    try:
        response: HttpResponseBase = await engine.arun(job, HttpAnswers(lease_policy), call)
    except Exception as exc:
        if job.started or not isinstance(exc, StoreUnavailable):
            return _not_run(job, lease_policy, exc, None)
        if lease_policy.get_on_store_unavailable() != "run":
            return exc.as_response()
        _warn_unprotected(job)
        return await call()
    return response


#: id(policy) -> (policy, the policy in lease mode): an async view's policy is merged
#: once, not per request (an entry holds its policy, so no other takes its id).
_LEASE_POLICIES: dict[int, tuple[Policy, Policy]] = {}


def _in_lease_mode(policy: Policy) -> Policy:
    """``policy`` with ``mode="lease"`` where it leaves the mode to the settings."""
    if policy.mode is not None:
        return policy
    found = _LEASE_POLICIES.get(id(policy))
    if found is not None and found[0] is policy:
        return found[1]
    merged = policy.merged(mode="lease")
    if len(_LEASE_POLICIES) >= 1024:
        _LEASE_POLICIES.clear()
    _LEASE_POLICIES[id(policy)] = (policy, merged)
    return merged


async def aprepare(request: HttpRequest, policy: Policy) -> Job | HttpResponseBase | None:
    """:func:`prepare` for async views: a request that takes part has its caller's user
    loaded on the event loop (``request.auser()``) before the scope reads it."""
    plain: HttpRequest = getattr(request, "_request", request)
    if plain.method in UNSAFE_METHODS and header_value(plain, idempotency_settings.HEADER):
        await aload_user(request)
    return prepare(request, policy)


def _not_run(job: Job, policy: Policy, exc: Exception, call: Call | None) -> HttpResponseBase:
    """The answer when the engine raised ``exc``: the view's own error is raised again;
    the store's is answered (503), or the view runs unprotected where it opts in and
    did not run yet."""
    if isinstance(exc, StoreUnavailable):
        if job.started or call is None or policy.get_on_store_unavailable() != "run":
            return exc.as_response()
        _warn_unprotected(job)
        return call()
    if job.started:
        raise exc  # the view's own error
    if isinstance(exc, IdempotencyError):
        return exc.as_response()  # e.g. an unreadable record: nothing ran
    if isinstance(exc, ImproperlyConfigured) and not isinstance(exc, ImproperlyApplied):
        assert job.request is not None
        return misconfigured(job.request, exc)
    raise exc


def _warn_unprotected(job: Job) -> None:
    request: Any = job.request
    logger.warning(
        "idempotency: store unreachable; running %s %s without idempotency (on_store_unavailable)",
        request.method,
        request.path,
    )


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


__all__ = ["run", "run_async"]
