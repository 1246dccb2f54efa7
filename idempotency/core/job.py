"""One keyed run (:class:`Job`), what an interface supplies to the engine (:class:`Adapter`:
how its callers are answered) and how a run ended (:class:`Outcome`).

:class:`CallPolicy` resolves the options views, functions and tasks share (``None``: the
``IDEMPOTENCY`` setting of the same name) into the store, the mode and the seconds; views
add their HTTP options in :class:`idempotency.http.options.Policy` (a subclass).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from django.core.exceptions import ImproperlyConfigured

from idempotency import signals
from idempotency.conf import MODES, idempotency_settings
from idempotency.stores.base import AtomicStore, BaseStore, ClaimStatus, KeyState, get_store, stores
from idempotency.utils.hashing import log_ref

if TYPE_CHECKING:
    from django.dispatch import Signal
    from django.http import HttpRequest

logger = logging.getLogger("idempotency")

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


class Outcome(NamedTuple):
    """How a run ended, as its interface sees it: what to keep (None: release the key),
    what the caller gets, and for how long the record is replayed."""

    #: The record's response (a stored response, or an encoded result); None releases.
    stored: Any
    #: What the caller gets: a response, a result, or the exception to raise again.
    answer: Any
    ttl: float = 0.0
    #: The HTTP status, for signals (None for functions and tasks).
    status: int | None = None


@dataclass(frozen=True, slots=True)
class ReplayedRecord:
    """What a replay knows of the record it answered from: a function's ``on_replay``
    and ``replayed`` signal, a view's ``on_replay`` hook."""

    scope: str
    key: str
    #: The function's or task's name, or the request's path (who ran).
    owner: str
    #: When the record expires and the key runs again, or None where the store does not say.
    expires_at: datetime | None

    @classmethod
    def of(cls, job: Job, claim: KeyState) -> ReplayedRecord:
        """The record ``job`` replays from ``claim``."""
        expires = claim.expires_at
        return cls(
            scope=job.scope,
            key=job.key,
            owner=job.owner,
            expires_at=None if expires is None else datetime.fromtimestamp(expires, UTC),
        )


@dataclass(slots=True)
class Job:
    """One run of work under ``(scope, key)``: the options resolved, the state of the run."""

    store: BaseStore
    scope: str
    key: str
    fingerprint: str
    #: ``"atomic"`` (the store is an AtomicStore) or ``"lease"``.
    mode: str
    lease: float
    ttl: float
    wait: float
    #: Recorded for the admin: the HTTP method, ``FUNCTION`` or ``TASK``.
    method: str
    #: Recorded for the admin: the path, or the function's or task's name.
    route: str
    #: Who runs, in logs: the path, the function's or the task's name.
    owner: str
    #: ``http``, ``function`` or ``task`` (spans).
    interface: str
    #: A bounded label of whose keys these are (spans): ``shared``, ``auth.user``, ...
    scope_kind: str = "shared"
    #: The HTTP request (None for functions and tasks): signals carry it.
    request: HttpRequest | None = None
    #: ``(limit, window)``: new records per scope and window (``MAX_NEW_RECORDS``).
    quota: tuple[int, float] | None = None
    #: Atomic mode: run first, insert the completed record last (``claim="optimistic"``).
    optimistic: bool = False
    #: Atomic mode: the aliases the transaction spans, the store's first.
    databases: list[str] = field(default_factory=list)
    #: Seconds the store took to decide who owns the key (look-ups and claims).
    claim_seconds: float | None = None
    #: The work has started: from then on it never runs again in this call.
    started: bool = False
    #: The claim was given back during the work (a task's ``retry()``): nothing to store.
    finished: bool = False

    @property
    def ref(self) -> str:
        """The record as logs name it (hashed: logs never carry a raw key)."""
        return log_ref(self.scope, self.key)

    def send(self, signal: Signal, **extra: Any) -> None:
        """Send ``signal`` for this run (nothing is built when nobody listens)."""
        if not signals.heard(signal):
            return
        signal.send(
            sender=type(self.store),
            request=self.request,
            scope=self.scope,
            key=self.key,
            route=self.signal_route(),
            claim_seconds=self.claim_seconds,
            **extra,
        )

    def signal_route(self) -> str | None:
        """The URL pattern that matched the request (bounded, unlike the path), for
        metrics; None outside HTTP."""
        if self.request is None:
            return None
        match = getattr(self.request, "resolver_match", None)
        return str(match.route) if match is not None and match.route else "<unmatched>"

    def stale(self, claim: KeyState, what: str) -> None:
        """The owner's ``what`` (completion, release) was refused: it lost the key."""
        logger.warning(
            "idempotency: the %s of %s by %s was refused: its lease ran out and another "
            "caller took the key over (fence %s). Raise the lease above the work's longest "
            "run time.",
            what,
            self.ref,
            self.owner,
            claim.fence,
        )
        self.send(signals.stale_owner, fence=claim.fence)


class Adapter(Protocol):
    """What an interface supplies: how its callers are answered. Each method may raise
    (a function's caller gets exceptions); async runs call ``akeep`` and ``afailure``
    instead of ``keep`` and ``failure``."""

    def adopts(self, job: Job, claim: KeyState) -> bool:
        """A MISMATCH that is the caller's own record after all (stored under an older
        fingerprint): set ``job.fingerprint`` to it and return True to claim again."""
        ...

    def replay(self, job: Job, claim: KeyState) -> Any:
        """The answer from a completed record (``claim.response``)."""
        ...

    def refuse(self, job: Job, claim: KeyState) -> Any:
        """The answer to a caller that cannot run: IN_PROGRESS (the wait ran out) or
        MISMATCH."""
        ...

    def over_quota(self, job: Job, retry_after: float) -> Any:
        """The answer to a new record over ``MAX_NEW_RECORDS``."""
        ...

    def bind(self, job: Job, claim: KeyState | None) -> None:
        """The caller owns the key (``claim``: None before an optimistic run)."""
        ...

    def keep(self, job: Job, result: Any) -> Outcome:
        """What the work's ``result`` leaves: raising releases the key."""
        ...

    def failure(self, job: Job, exc: BaseException) -> Outcome | None:
        """What the work's exception ``exc`` leaves: None releases the key and raises it
        again; an outcome whose ``answer`` is ``exc`` stores and raises it."""
        ...

    async def akeep(self, job: Job, result: Any) -> Outcome:
        """:meth:`keep` for an async run (a response may be an async stream)."""
        ...

    async def afailure(self, job: Job, exc: BaseException) -> Outcome | None:
        """:meth:`failure` for an async run."""
        ...


__all__ = ["Adapter", "Job", "Outcome", "ReplayedRecord"]
