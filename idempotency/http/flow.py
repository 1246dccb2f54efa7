"""What every path of the request flow shares: taking part, the prepared request, the
answers to a request that does not own its key, and the wait for one in progress."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponseBase

from idempotency import signals
from idempotency.backoff import Backoff
from idempotency.conf import DEFAULTS, idempotency_settings
from idempotency.exceptions import (
    IdempotencyAnonymousNotAllowed,
    IdempotencyKeyMismatch,
    IdempotencyKeyRequired,
    IdempotencyRequestInProgress,
    IdempotencyTooManyRecords,
    InvalidIdempotencyKey,
)
from idempotency.http.keys import header_value, parse_key
from idempotency.http.policy import Policy
from idempotency.http.responses import is_storable, kept, replay, retry_after
from idempotency.policy import lease_over
from idempotency.problems import problem_response
from idempotency.scopes import SharedScope
from idempotency.stores import record_digest
from idempotency.stores.base import BaseStore, Claim, ClaimStatus, StoredResponse
from idempotency.tracing import step

P = ParamSpec("P")
T = TypeVar("T")

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: ``prepare``'s ``scope`` when not given: the policy resolves it.
_UNRESOLVED: Any = object()

Call = Callable[[], HttpResponseBase]
Convert = Callable[[Exception], HttpResponseBase]
Finalize = Callable[[HttpResponseBase], HttpResponseBase]


def identity(response: HttpResponseBase) -> HttpResponseBase:
    return response


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
    #: The request's method and path, as the store records them.
    method: str = ""
    path: str = ""
    #: Seconds the store took to decide who owns the key (lookup or claim).
    claim_seconds: float | None = None

    #: What its spans say (``idempotency.tracing``): the HTTP interface.
    interface = "http"

    @property
    def scope_kind(self) -> str:
        """A bounded label of the scope, for spans: ``shared`` (``shared(...)`` on the
        view), ``named`` (a string on the view: a part of each caller's records), the
        principal's kind where the default scope made it (``auth.user`` of
        ``auth.user:<pk>``, ``token``), else ``custom``; never the scope itself."""
        if isinstance(self.policy.scope, SharedScope):
            return "shared"
        if isinstance(self.policy.scope, str):
            return "named"
        if self.policy.scope is None and DEFAULTS["SCOPE"] == idempotency_settings.SCOPE:
            kind, colon, _ = self.scope.partition(":")
            return kind if colon else "custom"
        return "custom"


def bind(prepared: Prepared, claim: Claim | None = None) -> IdempotencyContext:
    """The request now owns its key: ``request.idempotency`` (set here and nowhere else),
    which also tells inner interfaces that this request is handled."""
    context = IdempotencyContext(
        prepared.scope,
        prepared.key,
        prepared.fingerprint,
        prepared.mode,
        prepared.store,
        fence=claim.fence if claim is not None else 0,
        recovery_point=claim.recovery_point if claim is not None else "",
        recovery_data=claim.recovery_data if claim is not None else None,
        taken_over=claim.taken_over if claim is not None else False,
    )
    prepared.request.idempotency = context  # type: ignore[attr-defined]
    return context


def route_of(request: HttpRequest) -> str:
    """The URL pattern that matched ``request`` (bounded, unlike the path), for metrics."""
    match = getattr(request, "resolver_match", None)
    return str(match.route) if match is not None and match.route else "<unmatched>"


def send(signal: Any, prepared: Prepared, **extra: Any) -> None:
    if not signals.heard(signal):  # nobody listens: build nothing (route, arguments)
        return
    signal.send(
        sender=type(prepared.store),
        request=prepared.request,
        scope=prepared.scope,
        key=prepared.key,
        route=route_of(prepared.request),
        claim_seconds=prepared.claim_seconds,
        **extra,
    )


def timed(prepared: Prepared, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``call(*args, **kwargs)``, its duration added to ``prepared.claim_seconds``: a store
    call that decides who owns the key (traced as ``idempotency.claim``)."""
    started = time.perf_counter()
    try:
        if idempotency_settings.OPENTELEMETRY:
            return step("claim", prepared, call, *args, **kwargs)
        return call(*args, **kwargs)
    finally:
        elapsed = time.perf_counter() - started
        prepared.claim_seconds = (prepared.claim_seconds or 0.0) + elapsed


def takes_part(request: HttpRequest, policy: Policy) -> bool:
    """Whether the request may take part (an unsafe method, with a key or where the view
    requires one): what :func:`prepare` decides before it needs the caller."""
    plain: HttpRequest = getattr(request, "_request", request)  # DRF's Request wraps it
    if plain.method not in UNSAFE_METHODS or not idempotency_settings.ENABLED:
        return False
    has_key = header_value(plain, idempotency_settings.HEADER) is not None
    return has_key or bool(policy.get_required())


async def aprepare(request: HttpRequest, policy: Policy) -> Prepared | HttpResponseBase | None:
    """:func:`prepare` for async views, on the event loop: the caller's scope is resolved
    asynchronously (:meth:`~idempotency.http.policy.Policy.aget_scope`)."""
    if not takes_part(request, policy):
        return None
    return prepare(request, policy, scope=await policy.aget_scope(request))


def prepare(
    request: HttpRequest, policy: Policy, *, scope: Any = _UNRESOLVED
) -> Prepared | HttpResponseBase | None:
    """Decide whether the request takes part: None to run the view plainly, a response
    for an error, or the prepared key, scope and fingerprint. ``scope``: the caller's
    scope when already resolved (:func:`aprepare`)."""
    plain: HttpRequest = getattr(request, "_request", request)  # DRF's Request wraps it
    if plain.method not in UNSAFE_METHODS or not idempotency_settings.ENABLED:
        return None
    try:
        key = parse_key(header_value(plain, idempotency_settings.HEADER))
        if key is None:
            if policy.get_required():
                raise IdempotencyKeyRequired(
                    f"This endpoint requires an {idempotency_settings.HEADER} header."
                )
            return None
        if scope is _UNRESOLVED:
            scope = policy.get_scope(request)
        if scope is None:
            if idempotency_settings.ANONYMOUS == "ignore":
                return None
            raise IdempotencyAnonymousNotAllowed()
        fingerprint = policy.get_fingerprint(request)
    except (InvalidIdempotencyKey, IdempotencyKeyRequired, IdempotencyAnonymousNotAllowed) as exc:
        if not isinstance(exc, IdempotencyAnonymousNotAllowed):
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
        method=plain.method or "",
        path=plain.path,
    )


def answer(prepared: Prepared, claim: Claim) -> HttpResponseBase:
    """The response to a request that does not own the key."""
    if claim.status is ClaimStatus.COMPLETED and claim.response is not None:
        send(signals.replayed, prepared)
        return step("replay", prepared, replay, claim.response)
    if claim.status is ClaimStatus.MISMATCH:
        own = older_own(prepared, claim)
        if own is not None:
            return answer(prepared, own)
        send(signals.mismatch, prepared)
        return IdempotencyKeyMismatch().as_response()
    send(signals.conflict, prepared)
    wait = retry_after(claim.retry_after, prepared.policy.get_lease())
    return IdempotencyRequestInProgress(retry_after=wait).as_response()


def older_own(prepared: Prepared, claim: Claim) -> Claim | None:
    """A MISMATCH whose record is this request's own after all, fingerprinted under an
    older secret or unkeyed (before fingerprints were keyed): the record as looked up
    with its own fingerprint. None for a real mismatch, and for fingerprint functions of
    the project's own (they have no older form)."""
    from idempotency.http.fingerprints import older_request_fingerprints, request_fingerprint

    stored = claim.fingerprint
    if not stored:
        return None
    policy = prepared.policy
    if (policy.fingerprint or idempotency_settings.imported("FINGERPRINT")) is not (
        request_fingerprint
    ):
        return None
    headers = idempotency_settings.FINGERPRINT_HEADERS
    if stored not in older_request_fingerprints(prepared.request, headers):
        return None
    own = prepared.store.lookup(prepared.scope, prepared.key, fingerprint=stored)
    if own is None or own.status is ClaimStatus.MISMATCH:
        # released or replaced meanwhile: the client retries
        return Claim(ClaimStatus.IN_PROGRESS, retry_after=1.0)
    return own


def poll(prepared: Prepared, wait: float) -> Claim | None:
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


def store_response(prepared: Prepared, response: HttpResponseBase) -> StoredResponse | None:
    """What to keep of ``response``, or None when its outcome releases the key."""
    policy = prepared.policy
    if not is_storable(response.status_code, store_errors=policy.get_store_errors()):
        return None
    if policy.get_ttl_for(response.status_code) <= 0:
        return None  # ERROR_TTL 0: a definitive 4xx is not kept
    return kept(
        response,
        limit=idempotency_settings.MAX_RESPONSE_BYTES,
        status_only=policy.get_status_only(),
        redact=policy.get_redact(),
    )


def over_quota(prepared: Prepared) -> HttpResponseBase | None:
    """Count a new record of the caller's scope (``MAX_NEW_RECORDS``): None while within
    the limit, else the 429 to answer, with the window's remaining seconds in
    ``Retry-After``."""
    policy = prepared.policy
    limit = policy.get_max_new_records()
    if limit is None:
        return None
    count, left = prepared.store.count_new_record(prepared.scope, window=policy.get_record_window())
    if count <= limit:
        return None
    return IdempotencyTooManyRecords(retry_after=math.ceil(left)).as_response()


def answer_to_exception(
    prepared: Prepared, exc: Exception, convert: Convert | None, finalize: Finalize
) -> HttpResponseBase | None:
    """The response to the view's exception ``exc``, or None to re-raise it.

    DRF's ``handle_exception`` (``convert``) answers API exceptions. What nothing converts
    propagates, unless the view stores errors (``store_errors=True``): then the answer is
    Django's own (``response_for_exception``: the 500 of ``handler500``), so it is stored
    and a retry replays it instead of running the view again. Call it from the ``except``
    clause of ``exc`` (Django's handler reads ``sys.exc_info()``)."""
    if convert is not None:
        try:
            return finalize(convert(exc))
        except Exception as unconverted:
            if unconverted is not exc or not prepared.policy.get_store_errors():
                raise
    elif not prepared.policy.get_store_errors():
        return None
    from django.core.handlers.exception import response_for_exception

    return response_for_exception(prepared.request, exc)


#: An in-progress record whose lease ran out: the next claim takes it over.
abandoned = lease_over


def answer_waiting(prepared: Prepared, claim: Claim) -> HttpResponseBase:
    """Answer from a record someone else holds, after waiting up to ``wait`` for it."""
    if claim.status is ClaimStatus.IN_PROGRESS and prepared.policy.get_wait() > 0:
        claim = poll(prepared, prepared.policy.get_wait()) or claim
    return answer(prepared, claim)
