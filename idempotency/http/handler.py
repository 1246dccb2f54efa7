"""The entry every HTTP interface calls (decorator, mixin, middleware, Ninja): run a
view under the idempotency contract, and answer its callers.

1. :func:`~idempotency.http.requests.prepare` decides whether the request takes part
   and makes its job: the key, the caller's scope, the fingerprint, the view's options.
2. The engine (:mod:`idempotency.core.engine`) claims the key or answers from its
   record, runs the view, keeps or releases its response; :class:`HttpAnswers` says
   how: a replay, a 409 in progress, a 422 mismatch, what of a response is kept.
3. Here: a store that cannot be reached before the view ran answers 503, or runs the
   view unprotected where it opts in (``on_store_unavailable="run"``); a view never
   runs twice in one request.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.exception import response_for_exception
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.core import engine
from idempotency.core.job import Job, Outcome, ReplayedRecord
from idempotency.exceptions import (
    IdempotencyError,
    ImproperlyApplied,
    KeyMismatch,
    RequestInProgress,
    StoreMisconfigured,
    StoreUnavailable,
    TooManyRecords,
)
from idempotency.http.fingerprints import older_request_fingerprints, request_fingerprint
from idempotency.http.options import Policy, ReplayHook, resolve
from idempotency.http.requests import IdempotencyContext, aprepare, prepare
from idempotency.http.responses import (
    NEVER_REPLAYED,
    REPLAYED_HEADER,
    UnreplayableResponse,
    akept,
    is_storable,
    kept,
    replay,
    retry_after,
)
from idempotency.http.views import Call, Convert, Finalize
from idempotency.stores.base import ClaimStatus, KeyState, unreadable_record

logger = logging.getLogger("idempotency")


def identity(response: HttpResponseBase) -> HttpResponseBase:
    return response


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
        unprotected = lease_policy.get_on_store_unavailable() == "run"
        if job.started or not isinstance(exc, StoreUnavailable) or not unprotected:
            return _not_run(job, lease_policy, exc, None)  # raised again, or answered
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


@dataclass
class HttpAnswers:
    """The adapter of one request: its policy, and how its view's exceptions are
    answered (``convert``: DRF's ``handle_exception`` or Ninja's handlers; ``finalize``:
    DRF's rendering, so a response's bytes can be stored)."""

    policy: Policy
    convert: Convert | None = None
    finalize: Finalize = identity

    # -- a request that does not own its key --------------------------------------------

    def adopts(self, job: Job, claim: KeyState) -> bool:
        """A MISMATCH whose record is this request's own after all, fingerprinted under an
        older secret or unkeyed (before fingerprints were keyed). Not for fingerprint
        functions of the project's own (they have no older form)."""
        stored = claim.fingerprint
        if not stored or stored == job.fingerprint:
            return False
        policy = self.policy
        if (policy.fingerprint or idempotency_settings.imported("FINGERPRINT")) is not (
            request_fingerprint
        ):
            return False
        headers = idempotency_settings.FINGERPRINT_HEADERS
        assert job.request is not None
        if stored not in older_request_fingerprints(job.request, headers):
            return False
        job.fingerprint = stored
        return True

    def replay(self, job: Job, claim: KeyState) -> HttpResponseBase:
        """The stored response, read through the replay allow-list (a record it refuses
        is unreadable: nothing runs), with the view's ``on_replay`` hook's headers."""
        assert claim.response is not None
        try:
            response = replay(claim.response, dropped=lambda names: _dropped(job, names))
        except UnreplayableResponse as exc:
            raise unreadable_record(type(job.store).__name__, job.scope, job.key, str(exc)) from exc
        hook = self.policy.get_on_replay()
        if hook is not None:
            on_replay(hook, job, claim, response)
        job.send(signals.replayed)
        return response

    def refuse(self, job: Job, claim: KeyState) -> HttpResponseBase:
        if claim.status is ClaimStatus.MISMATCH:
            return KeyMismatch().as_response()
        wait = retry_after(claim.retry_after, job.lease)
        return RequestInProgress(retry_after=wait).as_response()

    def over_quota(self, job: Job, left: float) -> HttpResponseBase:
        return TooManyRecords(retry_after=math.ceil(left)).as_response()

    # -- the owner ----------------------------------------------------------------------

    def bind(self, job: Job, claim: KeyState | None) -> None:
        """The request owns its key: ``request.idempotency`` (set here and nowhere else),
        which also tells inner interfaces that this request is handled."""
        assert job.request is not None
        if claim is None:
            context = IdempotencyContext(job.scope, job.key, job.fingerprint, job.mode, job.store)
        else:
            context = IdempotencyContext(
                job.scope,
                job.key,
                job.fingerprint,
                job.mode,
                job.store,
                claim.fence,
                claim.recovery_point,
                claim.recovery_data,
                claim.taken_over,
            )
        job.request.__dict__["idempotency"] = context  # HttpRequest declares no such attribute

    def keep(self, job: Job, response: HttpResponseBase) -> Outcome:
        """What to keep of the view's ``response`` (None: its outcome releases the key)."""
        options = resolve(self.policy)
        status = response.status_code
        ttl = options.ttl_for(status)  # ERROR_TTL 0: a definitive 4xx is not kept
        if ttl <= 0 or not is_storable(status, store_errors=options.store_errors):
            return Outcome(None, response, ttl, status)
        limit = idempotency_settings.MAX_RESPONSE_BYTES
        stored = kept(response, limit=limit, status_only=options.status_only, redact=options.redact)
        return Outcome(stored, response, ttl, status)

    async def akeep(self, job: Job, response: HttpResponseBase) -> Outcome:
        """:meth:`keep` for async views (which may return async streams)."""
        options = resolve(self.policy)
        status = response.status_code
        ttl = options.ttl_for(status)
        if ttl <= 0 or not is_storable(status, store_errors=options.store_errors):
            return Outcome(None, response, ttl, status)
        limit = idempotency_settings.MAX_RESPONSE_BYTES
        stored = await akept(
            response, limit=limit, status_only=options.status_only, redact=options.redact
        )
        return Outcome(stored, response, ttl, status)

    def failure(self, job: Job, exc: BaseException) -> Outcome | None:
        """The answer to the view's exception, or None to re-raise it.

        An :class:`IdempotencyError` is the machinery's own answer (a nested call's
        mismatch, a stale owner): answered, never kept. DRF's ``handle_exception``
        (``convert``) answers API exceptions. What nothing converts propagates, unless
        the view stores errors (``store_errors=True``): then the answer is Django's own
        (the 500 of ``handler500``), kept so a retry replays it instead of running the
        view again."""
        if isinstance(exc, IdempotencyError):
            return Outcome(None, exc.as_response(), 0.0, exc.status_code)
        if not isinstance(exc, Exception):
            return None
        if self.convert is not None:
            try:
                return self.keep(job, self.finalize(self.convert(exc)))
            except Exception as unconverted:
                if unconverted is not exc or not self.policy.get_store_errors():
                    raise
        elif not self.policy.get_store_errors():
            return None
        return self.keep(job, django_answer(job, exc))

    async def afailure(self, job: Job, exc: BaseException) -> Outcome | None:
        """:meth:`failure` for async views: their exceptions are converted where they are
        raised (Ninja), so only Django's own answer is left, made in a thread."""
        if isinstance(exc, IdempotencyError):
            return Outcome(None, exc.as_response(), 0.0, exc.status_code)
        if not isinstance(exc, Exception) or not self.policy.get_store_errors():
            return None
        response = await sync_to_async(django_answer, thread_sensitive=False)(job, exc)
        return await self.akeep(job, response)


#: Headers an ``on_replay`` hook may not set: hop-by-hop ones, which WSGI and ASGI
#: servers own (``Set-Cookie`` it may: a cookie the application sets now, for this
#: request, is not another response's cookie replayed).
_NOT_FROM_HOOKS = NEVER_REPLAYED - {"set-cookie", "set-cookie2"}


def on_replay(hook: ReplayHook, job: Job, claim: KeyState, response: HttpResponse) -> None:
    """Call a view's ``on_replay`` ``hook`` with the replayed ``response``: it may add
    headers, nothing else. A hook that changes the status, the body or the
    ``Idempotent-Replayed`` marker, sets a hop-by-hop header, or returns a response of
    its own raises :class:`~idempotency.exceptions.ImproperlyApplied` (a bug of the
    application: the client gets a 500, never a changed replay)."""
    assert job.request is not None and claim.response is not None
    status = response.status_code
    returned = hook(job.request, response, ReplayedRecord.of(job, claim))
    wrong = []
    if returned is not None:
        wrong.append(f"returned {type(returned).__name__} (it changes the response in place)")
    if response.status_code != status:
        wrong.append(f"changed the status to {response.status_code}")
    if response.content != claim.response.body:
        wrong.append("changed the body")
    if response.get(REPLAYED_HEADER) != "true":
        wrong.append(f"changed {REPLAYED_HEADER}")
    wrong += [f"set {name}" for name in response.headers if name.lower() in _NOT_FROM_HOOKS]
    if wrong:
        raise ImproperlyApplied(
            f"The on_replay hook {getattr(hook, '__qualname__', hook)!r} {', '.join(wrong)}: "
            "it may only add headers to a replayed response."
        )


def _dropped(job: Job, names: list[str]) -> None:
    """A stored record held headers no record of this library holds (``Set-Cookie``, a
    hop-by-hop header): planted by a writer of the store. They were not replayed."""
    logger.warning(
        "idempotency: the record %s in %s holds headers that are never stored (%s); "
        "replayed without them. Someone other than this library wrote to the store.",
        job.ref,
        type(job.store).__name__,
        ", ".join(sorted({name.lower() for name in names})),
    )


def django_answer(job: Job, exc: Exception) -> HttpResponseBase:
    """Django's response to ``exc`` (``handler500``, or the technical 500 under DEBUG,
    which reads the exception being handled: it is raised again here for that)."""
    assert job.request is not None
    try:
        raise exc
    except Exception:
        return response_for_exception(job.request, exc)
