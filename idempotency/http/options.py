"""Per-view idempotency options, merged over the global settings (most specific wins).

:class:`Policy` is :class:`idempotency.core.job.CallPolicy` (the options views, functions
and tasks share, resolved in one place) plus the options only HTTP has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse

from idempotency.conf import idempotency_settings
from idempotency.core.job import CallPolicy, ReplayedRecord
from idempotency.scopes import SharedScope

#: What a view does when its store cannot be reached: answer 503, or run unprotected.
ON_STORE_UNAVAILABLE = ("reject", "run")
CLAIMS = ("first", "optimistic")

_NOTHING: frozenset[str] = frozenset()

ScopeOption = str | Callable[[HttpRequest], "str | None"] | None
#: ``on_replay(request, response, record)``: adds headers to a replayed response.
ReplayHook = Callable[[HttpRequest, HttpResponse, ReplayedRecord], object]


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
        if self.redact is not None and (
            isinstance(self.redact, str) or not all(isinstance(f, str) for f in self.redact)
        ):
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
        choice = self.on_store_unavailable
        if choice is not None and choice not in ON_STORE_UNAVAILABLE:
            raise ValueError(
                f"on_store_unavailable must be one of {ON_STORE_UNAVAILABLE}, not {choice!r}"
            )
        if self.claim is not None and self.claim not in CLAIMS:
            raise ValueError(f"claim must be one of {CLAIMS}, not {self.claim!r}")
        if self.databases is not None and (
            isinstance(self.databases, str)
            or not all(isinstance(alias, str) for alias in self.databases)
        ):
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
