"""Per-view idempotency options, merged over the global settings (most specific wins)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from django.http import HttpRequest

from idempotency.conf import MODES, idempotency_settings
from idempotency.stores import get_store
from idempotency.stores.base import BaseStore

#: What a view does when its store cannot be reached: answer 503, or run unprotected.
ON_STORE_UNAVAILABLE = ("reject", "run")
CLAIMS = ("first", "optimistic")

ScopeOption = str | Callable[[HttpRequest], "str | None"] | None


@dataclass(frozen=True)
class Policy:
    """Options of one view; ``None`` means "use the global setting"."""

    required: bool | None = None
    ttl: float | None = None
    lease: float | None = None
    scope: ScopeOption = None
    fingerprint: Callable[..., str] | None = None
    store: str | BaseStore | type[BaseStore] | None = None
    mode: str | None = None
    wait: float | None = None
    store_errors: bool | None = None
    on_store_unavailable: str | None = None
    claim: str | None = None
    databases: tuple[str, ...] | list[str] | None = None

    def __post_init__(self) -> None:
        if self.mode is not None and self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {self.mode!r}")
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
        for name in ("ttl", "lease", "wait"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int | float) or value < 0):
                raise ValueError(f"{name} must be a non-negative number of seconds, not {value!r}")
        if self.ttl is not None and self.ttl <= 0:
            raise ValueError("ttl must be positive")
        if self.lease is not None and self.lease <= 0:
            raise ValueError("lease must be positive")

    def merged(self, **overrides: Any) -> Policy:
        """This policy with the non-None ``overrides`` taking precedence."""
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    # -- resolved values -----------------------------------------------------------------

    def get_required(self) -> bool:
        return bool(idempotency_settings.REQUIRED if self.required is None else self.required)

    def get_ttl(self) -> float:
        return float(idempotency_settings.TTL if self.ttl is None else self.ttl)

    def get_lease(self) -> float:
        return float(idempotency_settings.LEASE if self.lease is None else self.lease)

    def get_wait(self) -> float:
        return float(idempotency_settings.WAIT if self.wait is None else self.wait)

    def get_store_errors(self) -> bool:
        value = (
            idempotency_settings.STORE_ERRORS if self.store_errors is None else self.store_errors
        )
        return bool(value)

    def get_on_store_unavailable(self) -> str:
        """``"reject"`` (503, the view does not run) or ``"run"`` (run it unprotected)."""
        value = self.on_store_unavailable or idempotency_settings.STORE_UNAVAILABLE
        return str(value)

    def get_claim(self) -> str:
        return str(idempotency_settings.ATOMIC_CLAIM if self.claim is None else self.claim)

    def get_databases(self, store_alias: str) -> list[str]:
        """Aliases atomic mode wraps in the view's transaction: the store's first."""
        extra = idempotency_settings.ATOMIC_DATABASES if self.databases is None else self.databases
        return [store_alias, *(alias for alias in extra if alias != store_alias)]

    def get_store(self) -> BaseStore:
        if isinstance(self.store, BaseStore):  # a store instance given to the view: as is
            return self.store
        return get_store(self.store)

    def get_mode(self, store: BaseStore) -> str:
        mode = self.mode or idempotency_settings.MODE
        if mode == "auto":
            return "atomic" if store.supports_atomic else "lease"
        if mode == "atomic" and not store.supports_atomic:
            from django.core.exceptions import ImproperlyConfigured

            raise ImproperlyConfigured(
                f"{type(store).__name__} cannot run atomic mode; use mode='lease' or DatabaseStore."
            )
        return str(mode)

    def get_scope(self, request: HttpRequest) -> str | None:
        scope = self.scope
        if scope is None:
            return idempotency_settings.imported("SCOPE")(request)  # type: ignore[no-any-return]
        if callable(scope):
            return scope(request)
        return str(scope)

    def get_fingerprint(self, request: HttpRequest) -> str:
        func = self.fingerprint or idempotency_settings.imported("FINGERPRINT")
        return str(func(request, idempotency_settings.FINGERPRINT_HEADERS))
