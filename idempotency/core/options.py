"""The one resolver of the options views, functions and tasks share.

:class:`CallPolicy` holds ``ttl``, ``lease``, ``wait``, ``store``, ``mode`` and
``store_errors`` (None: the ``IDEMPOTENCY`` setting of the same name), validates them
once, and resolves them: the store, the mode a store runs in (:meth:`CallPolicy.get_mode`),
the seconds. Views add their HTTP options in :class:`idempotency.http.options.Policy` (a
subclass); :func:`~idempotency.functions.idempotent_function` and
:class:`~idempotency.tasks.IdempotentTask` use it as it is. :func:`lease_over` is the one
test of a lease that ran out.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

from idempotency.conf import MODES, idempotency_settings
from idempotency.stores import get_store, stores
from idempotency.stores.base import AtomicStore, BaseStore, ClaimStatus, KeyState

P = TypeVar("P", bound="CallPolicy")

#: ``store=``: an alias of ``IDEMPOTENCY["STORES"]``, a store instance, or None (the
#: ``"default"`` alias).
StoreOption = str | BaseStore | None


@dataclass(frozen=True)
class CallPolicy:
    """Options of one view, function or task; ``None`` means "use the global setting"."""

    ttl: float | None = None
    lease: float | None = None
    wait: float | None = None
    store: StoreOption = None
    mode: str | None = None
    store_errors: bool | None = None

    def __post_init__(self) -> None:
        if self.store is not None and not isinstance(self.store, str | BaseStore):
            raise TypeError(stores.type_error(self.store))
        if self.mode is not None and self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {self.mode!r}")
        for name in ("ttl", "lease", "wait"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or value < 0
            ):
                raise ValueError(f"{name} must be a non-negative number of seconds, not {value!r}")
        if self.ttl is not None and self.ttl <= 0:
            raise ValueError("ttl must be positive")
        if self.lease is not None and self.lease <= 0:
            raise ValueError("lease must be positive")

    def merged(self: P, **overrides: Any) -> P:
        """This policy with the non-None ``overrides`` taking precedence."""
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """Every option, in declaration order: the decorators' keywords, the mixin's and
        the task's ``idempotency_*`` attributes and the documented lists come from it."""
        return tuple(f.name for f in fields(cls))

    # -- resolved values -----------------------------------------------------------------

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

    def get_store(self) -> BaseStore:
        """The store: an instance as it is, else the one its alias configures."""
        return get_store(self.store)

    def get_mode(self, store: BaseStore) -> str:
        """``"atomic"`` or ``"lease"``: the mode this policy runs in on ``store`` (``auto``:
        atomic where the store supports it); ImproperlyConfigured for atomic mode on a
        store without it."""
        mode = self.mode or idempotency_settings.MODE
        atomic = isinstance(store, AtomicStore)
        if mode == "auto":
            return "atomic" if atomic else "lease"
        if mode == "atomic" and not atomic:
            raise ImproperlyConfigured(
                f"{type(store).__name__} cannot run atomic mode; use mode='lease' or DatabaseStore."
            )
        return str(mode)

    def runs_atomic(self, store: BaseStore) -> bool:
        return self.get_mode(store) == "atomic"

    def extra_databases(self) -> tuple[str, ...] | list[str]:
        """Aliases atomic mode's transaction spans beside the store's (``ATOMIC_DATABASES``)."""
        return tuple(idempotency_settings.ATOMIC_DATABASES)

    def get_databases(self, store_alias: str) -> list[str]:
        """Aliases atomic mode wraps in one transaction: the store's first."""
        extra = self.extra_databases()
        return [store_alias, *(alias for alias in extra if alias != store_alias)]


def lease_over(claim: KeyState | None) -> bool:
    """Whether a looked-up state leaves the key to the next claim: an in-progress record
    whose lease ran out (its owner died). None (absent) is not "over": there is nothing."""
    return claim is not None and claim.status is ClaimStatus.IN_PROGRESS and claim.retry_after <= 0
