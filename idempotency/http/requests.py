"""Which requests take part, and the job of one that does.

A request takes part when its method is unsafe and it carries a key (or its view
requires one). :func:`prepare` parses the key strictly, finds the caller's scope (after
authentication: DRF's ``initial()``, Ninja's auth) and the request's fingerprint, and
resolves the view's options into a :class:`~idempotency.core.job.Job` for the engine.
A view sees its own key as ``request.idempotency`` (:class:`IdempotencyContext`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponseBase

from idempotency import signals
from idempotency.conf import DEFAULTS, idempotency_settings
from idempotency.core.job import Job
from idempotency.exceptions import (
    IdempotencyAnonymousNotAllowed,
    IdempotencyKeyRequired,
    InvalidIdempotencyKey,
    StaleOwner,
)
from idempotency.http.keys import header_value, parse_key
from idempotency.http.options import Policy
from idempotency.problems import problem_response
from idempotency.scopes import SharedScope
from idempotency.stores import record_digest
from idempotency.stores.atomic import AtomicStore
from idempotency.stores.base import BaseStore

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
            raise StaleOwner(f"{self.scope}/{self.key} is no longer owned by this request")
        self.recovery_point = name
        self.recovery_data = data


def scope_kind(policy: Policy, scope: str) -> str:
    """A bounded label of the scope, for spans: ``shared`` (``shared(...)`` on the view),
    ``named`` (a string on the view: a part of each caller's records), the principal's
    kind where the default scope made it (``auth.user`` of ``auth.user:<pk>``,
    ``token``), else ``custom``; never the scope itself."""
    if isinstance(policy.scope, SharedScope):
        return "shared"
    if isinstance(policy.scope, str):
        return "named"
    if policy.scope is None and DEFAULTS["SCOPE"] == idempotency_settings.SCOPE:
        kind, colon, _ = scope.partition(":")
        return kind if colon else "custom"
    return "custom"


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
                raise IdempotencyKeyRequired(
                    f"This endpoint requires an {idempotency_settings.HEADER} header."
                )
            return None
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
    mode = policy.get_mode(store)
    limit = policy.get_max_new_records()
    return Job(
        store=store,
        scope=scope,
        key=key,
        fingerprint=fingerprint,
        mode=mode,
        lease=policy.get_lease(),
        ttl=policy.get_ttl(),
        wait=policy.get_wait(),
        method=plain.method or "",
        route=plain.path,
        owner=plain.path,
        interface="http",
        scope_kind=scope_kind(policy, scope),
        request=request,
        quota=None if limit is None else (limit, policy.get_record_window()),
        optimistic=mode == "atomic" and policy.get_claim() == "optimistic",
        databases=policy.get_databases(store.using) if isinstance(store, AtomicStore) else [],
    )


__all__ = ["UNSAFE_METHODS", "IdempotencyContext", "prepare", "route_of", "scope_kind"]
