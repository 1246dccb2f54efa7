"""Which requests take part, and the job of one that does.

A request takes part when its method is unsafe and it carries a key (or its view
requires one). :func:`prepare` parses the key strictly, finds the caller's scope (after
authentication: DRF's ``initial()``, Ninja's auth) and the request's fingerprint, and
resolves the view's options into a :class:`~idempotency.core.job.Job` for the engine.
A view sees its own key as ``request.idempotency`` (:class:`IdempotencyContext`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponseBase

from idempotency import signals
from idempotency.conf import DEFAULTS, idempotency_settings, on_reload
from idempotency.core.job import Job
from idempotency.exceptions import (
    AnonymousNotAllowed,
    KeyInvalid,
    KeyRequired,
    StaleOwner,
)
from idempotency.http.keys import header_value, parse_key
from idempotency.http.options import Policy
from idempotency.problems import problem_response
from idempotency.scopes import SharedScope
from idempotency.stores.base import AtomicStore, BaseStore
from idempotency.stores.records import record_digest

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


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
            raise StaleOwner(self.scope, self.key)
        self.recovery_point = name
        self.recovery_data = data


def _policy_scope_kind(policy: Policy) -> str | None:
    """A bounded label of a view's scope, for spans, as far as its policy and the settings
    decide it: ``shared`` (``shared(...)`` on the view), ``named`` (a string on the view:
    a part of each caller's records), ``custom``; None where the default scope made it
    (:func:`_scope_kind` reads the principal's kind from it: ``auth.user``, ``token``).
    Never the scope itself."""
    if isinstance(policy.scope, SharedScope):
        return "shared"
    if isinstance(policy.scope, str):
        return "named"
    if policy.scope is None and DEFAULTS["SCOPE"] == idempotency_settings.SCOPE:
        return None
    return "custom"


def _scope_kind(kind: str | None, scope: str) -> str:
    if kind is not None:
        return kind
    kind, colon, _ = scope.partition(":")
    return kind if colon else "custom"


class Resolved(NamedTuple):
    """What a job takes from its view's policy and the settings alone, not from its
    request: resolved once per policy (until the settings change), not per request."""

    policy: Policy
    store: BaseStore
    mode: str
    lease: float
    ttl: float
    wait: float
    quota: tuple[int, float] | None
    optimistic: bool
    databases: list[str]
    scope_kind: str | None
    #: What a response keeps (:class:`~idempotency.http.answers.HttpAnswers`): whether
    #: 5xx and transient 4xx are stored, bodies stored at all, the fields redacted.
    store_errors: bool
    status_only: bool
    redact: frozenset[str]
    #: Seconds a definitive 4xx is kept instead of ``ttl`` (None: ``ttl``; 0: not kept).
    error_ttl: float | None


def ttl_for(options: Resolved, status: int) -> float:
    """Seconds a response with ``status`` is kept: ``error_ttl`` for a 4xx where it is
    set (0: not kept), else the TTL (:meth:`Policy.get_ttl_for`, resolved)."""
    if 400 <= status < 500 and options.error_ttl is not None:
        return options.error_ttl
    return options.ttl


#: id(policy) -> its options resolved. An entry holds its policy, so no other policy
#: can take its id while it is here; cleared when the settings change, and when it has
#: grown past ``_MOST_RESOLVED`` (policies made per request).
_RESOLVED: dict[int, Resolved] = {}
_MOST_RESOLVED = 1024


@on_reload
def _forget_resolved() -> None:
    _RESOLVED.clear()


def resolve(policy: Policy) -> Resolved:
    """``policy``'s options for a job: the store, the mode, the seconds, the quota, the
    aliases; ImproperlyConfigured for a store that cannot work (never kept)."""
    found = _RESOLVED.get(id(policy))
    if found is not None and found.policy is policy:
        return found
    store = policy.get_store()
    mode = policy.get_mode(store)
    limit = policy.get_max_new_records()
    error_ttl = policy.error_ttl
    if error_ttl is None:
        error_ttl = idempotency_settings.ERROR_TTL
    resolved = Resolved(
        policy=policy,
        store=store,
        mode=mode,
        lease=policy.get_lease(),
        ttl=policy.get_ttl(),
        wait=policy.get_wait(),
        quota=None if limit is None else (limit, policy.get_record_window()),
        optimistic=mode == "atomic" and policy.get_claim() == "optimistic",
        databases=policy.get_databases(store.using) if isinstance(store, AtomicStore) else [],
        scope_kind=_policy_scope_kind(policy),
        store_errors=policy.get_store_errors(),
        status_only=policy.get_status_only(),
        redact=policy.get_redact(),
        error_ttl=None if error_ttl is None else float(error_ttl),
    )
    if len(_RESOLVED) >= _MOST_RESOLVED:
        _RESOLVED.clear()
    _RESOLVED[id(policy)] = resolved
    return resolved


def route_of(request: HttpRequest) -> str:
    """The URL pattern that matched ``request`` (bounded, unlike the path), for metrics."""
    match = getattr(request, "resolver_match", None)
    return str(match.route) if match is not None and match.route else "<unmatched>"


def prepare(request: HttpRequest, policy: Policy) -> Job | HttpResponseBase | None:
    """Whether ``request`` takes part: None to run the view plainly, a response for an
    error, or the job of its key. ImproperlyConfigured for a store that cannot work."""
    plain: HttpRequest = getattr(request, "_request", request)  # DRF's Request wraps it
    if plain.method not in UNSAFE_METHODS or not idempotency_settings.ENABLED:
        return None
    try:
        key = parse_key(header_value(plain, idempotency_settings.HEADER))
        if key is None:
            if policy.get_required():
                raise KeyRequired(
                    f"This endpoint requires an {idempotency_settings.HEADER} header."
                )
            return None
        scope = policy.get_scope(request)
        if scope is None:
            if idempotency_settings.ANONYMOUS == "ignore":
                return None
            raise AnonymousNotAllowed()
        fingerprint = policy.get_fingerprint(request)
    except (KeyInvalid, KeyRequired, AnonymousNotAllowed) as exc:
        if not isinstance(exc, AnonymousNotAllowed):
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
    options = resolve(policy)
    path = plain.path
    return Job(
        store=options.store,
        scope=scope,
        key=key,
        fingerprint=fingerprint,
        mode=options.mode,
        lease=options.lease,
        ttl=options.ttl,
        wait=options.wait,
        method=plain.method or "",
        route=path,
        owner=path,
        interface="http",
        scope_kind=_scope_kind(options.scope_kind, scope),
        request=request,
        quota=options.quota,
        optimistic=options.optimistic,
        databases=options.databases,
    )


__all__ = [
    "UNSAFE_METHODS",
    "IdempotencyContext",
    "Resolved",
    "prepare",
    "resolve",
    "route_of",
    "ttl_for",
]
