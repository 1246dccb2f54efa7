"""Per-view idempotency options, merged over the global settings (most specific wins).

:class:`Policy` is :class:`idempotency.core.job.CallPolicy` (the options views, functions
and tasks share) plus the options only HTTP has; :func:`resolve` reads what a job takes
from it once per policy, not per request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.http import HttpRequest, HttpResponse

from idempotency.conf import DEFAULTS, idempotency_settings, on_reload
from idempotency.core.job import CallPolicy, ReplayedRecord
from idempotency.scopes import SharedScope
from idempotency.stores.base import AtomicStore, BaseStore

#: What a view does when its store cannot be reached: answer 503, or run unprotected.
ON_STORE_UNAVAILABLE = ("reject", "run")
CLAIMS = ("first", "optimistic")

_NOTHING: frozenset[str] = frozenset()

ScopeOption = str | Callable[[HttpRequest], "str | None"] | None
#: ``on_replay(request, response, record)``: adds headers to a replayed response.
ReplayHook = Callable[[HttpRequest, HttpResponse, ReplayedRecord], object]


def _names(value: Any) -> bool:
    """Whether ``value`` is None or a list (or tuple) of strings, not one string."""
    return value is None or (
        not isinstance(value, str) and all(isinstance(name, str) for name in value)
    )


@dataclass(frozen=True)
class Policy(CallPolicy):
    """Options of one view; ``None`` means "use the global setting"."""

    required: bool | None = None
    scope: ScopeOption = None
    fingerprint: Callable[..., str] | None = None
    on_store_unavailable: str | None = None
    claim: str | None = None
    databases: tuple[str, ...] | list[str] | None = None
    status_only: bool | None = None
    redact: tuple[str, ...] | list[str] | None = None
    max_new_records: int | None = None
    record_window: float | None = None
    error_ttl: float | None = None
    on_replay: ReplayHook | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.on_replay is not None and not callable(self.on_replay):
            raise ValueError(
                f"on_replay must be a function (request, response, record), not {self.on_replay!r}"
            )
        if not _names(self.redact):
            raise ValueError(f"redact must be a list of field names, not {self.redact!r}")
        limit = self.max_new_records
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise ValueError(f"max_new_records must be a positive integer, not {limit!r}")
        for name in ("record_window", "error_ttl"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or value < 0
            ):
                raise ValueError(f"{name} must be a non-negative number of seconds, not {value!r}")
        if self.record_window is not None and self.record_window <= 0:
            raise ValueError("record_window must be positive")
        if self.on_store_unavailable not in (None, *ON_STORE_UNAVAILABLE):
            raise ValueError(
                f"on_store_unavailable must be one of {ON_STORE_UNAVAILABLE}, "
                f"not {self.on_store_unavailable!r}"
            )
        if self.claim not in (None, *CLAIMS):
            raise ValueError(f"claim must be one of {CLAIMS}, not {self.claim!r}")
        if not _names(self.databases):
            raise ValueError(f"databases must be a list of aliases, not {self.databases!r}")

    # -- resolved values -----------------------------------------------------------------

    def get_required(self) -> bool:
        return bool(idempotency_settings.REQUIRED if self.required is None else self.required)

    def get_on_store_unavailable(self) -> str:
        """``"reject"`` (503, the view does not run) or ``"run"`` (run it unprotected)."""
        value = self.on_store_unavailable or idempotency_settings.STORE_UNAVAILABLE
        return str(value)

    def get_status_only(self) -> bool:
        """Whether only the status and headers of a response are stored, never its body."""
        value = idempotency_settings.STATUS_ONLY if self.status_only is None else self.status_only
        return bool(value)

    def get_redact(self) -> frozenset[str]:
        """The JSON fields redacted before a body is stored: ``REDACT_FIELDS`` and the
        view's own ``redact`` (added to the setting's, never replacing them)."""
        configured = idempotency_settings.REDACT_FIELDS
        if not self.redact and not configured:
            return _NOTHING
        return frozenset((*configured, *(self.redact or ())))

    def get_max_new_records(self) -> int | None:
        """Most new records a scope may make per window (None: no limit)."""
        value = self.max_new_records
        if value is None:
            value = idempotency_settings.MAX_NEW_RECORDS
        return None if value is None else int(value)

    def get_record_window(self) -> float:
        value = self.record_window
        return float(idempotency_settings.RECORD_WINDOW if value is None else value)

    def get_ttl_for(self, status: int) -> float:
        """Seconds a response with ``status`` is kept: ``error_ttl`` (``ERROR_TTL``) for a
        4xx when set (0: not kept), else the TTL."""
        if 400 <= status < 500:
            value = self.error_ttl
            if value is None:
                value = idempotency_settings.ERROR_TTL
            if value is not None:
                return float(value)
        return self.get_ttl()

    def get_on_replay(self) -> ReplayHook | None:
        """The hook called on each replay (``on_replay``, else ``ON_REPLAY``), or None."""
        if self.on_replay is not None:
            return self.on_replay
        hook: ReplayHook | None = idempotency_settings.imported("ON_REPLAY")
        return hook

    def get_claim(self) -> str:
        return str(idempotency_settings.ATOMIC_CLAIM if self.claim is None else self.claim)

    def extra_databases(self) -> tuple[str, ...] | list[str]:
        """Aliases atomic mode's transaction spans beside the store's: the view's
        ``databases``, else ``ATOMIC_DATABASES``."""
        return super().extra_databases() if self.databases is None else self.databases

    def get_scope(self, request: HttpRequest) -> str | None:
        """The caller's scope, or None for an anonymous caller (``ANONYMOUS`` decides).

        A plain string names a part of each caller's records (``"shop"`` is
        ``"shop/auth.user:1"``), never records every caller shares: only
        :func:`~idempotency.scopes.shared` does that. An empty scope is anonymous."""
        scope = self.scope
        if scope is None:
            found = idempotency_settings.imported("SCOPE")(request)
        elif isinstance(scope, SharedScope):
            return str(scope)
        elif callable(scope):
            found = scope(request)
        else:
            caller = idempotency_settings.imported("SCOPE")(request)
            found = f"{scope}/{caller}" if caller else None
        return str(found) if found else None

    def get_fingerprint(self, request: HttpRequest) -> str:
        func = self.fingerprint or idempotency_settings.imported("FINGERPRINT")
        return str(func(request, idempotency_settings.FINGERPRINT_HEADERS))


class Resolved(NamedTuple):
    """What a job takes from its view's policy and the settings alone, not from its
    request: resolved once per policy (until the settings change)."""

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
    #: What a response keeps: whether 5xx and transient 4xx are stored, bodies stored at
    #: all, the fields redacted.
    store_errors: bool
    status_only: bool
    redact: frozenset[str]
    #: Seconds a definitive 4xx is kept instead of ``ttl`` (None: ``ttl``; 0: not kept).
    error_ttl: float | None

    def ttl_for(self, status: int) -> float:
        """:meth:`Policy.get_ttl_for`, resolved."""
        if 400 <= status < 500 and self.error_ttl is not None:
            return self.error_ttl
        return self.ttl


def _policy_scope_kind(policy: Policy) -> str | None:
    """A bounded label of a view's scope, for spans, as far as its policy and the settings
    decide it: ``shared``, ``named`` (a string on the view), ``custom``; None where the
    default scope made it (the principal's kind is then read from the scope itself).
    Never the scope itself."""
    if isinstance(policy.scope, SharedScope):
        return "shared"
    if isinstance(policy.scope, str):
        return "named"
    if policy.scope is None and DEFAULTS["SCOPE"] == idempotency_settings.SCOPE:
        return None
    return "custom"


#: id(policy) -> its options resolved. An entry holds its policy, so no other policy
#: can take its id while it is here; cleared when the settings change, and when it has
#: grown past ``_MOST_RESOLVED`` (policies made per request).
_RESOLVED: dict[int, Resolved] = {}
_MOST_RESOLVED = 1024


@on_reload
def _forget_resolved() -> None:
    _RESOLVED.clear()


def resolve(policy: Policy) -> Resolved:
    """``policy``'s options for a job; ImproperlyConfigured for a store that cannot
    work (never kept)."""
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
