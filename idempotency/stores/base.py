"""The contract every store keeps: :class:`BaseStore`, and :class:`AtomicStore` for the
stores that can run atomic mode; and ``stores``, the configured ones by alias.

``IDEMPOTENCY["STORES"]`` configures them as ``CACHES`` configures caches: each alias
names a ``BACKEND`` (a subclass of :class:`BaseStore`), maybe a ``LOCATION`` and
``OPTIONS`` (:mod:`idempotency.utils.backends`). ``stores["redis"]`` is the store of the
alias ``"redis"``, made once per process and kept until the settings change;
:func:`get_store` takes an alias or a store instance.

A record is identified by ``(scope, key)``. ``claim`` decides atomically which caller
owns a new key; only the owner, proven by its fencing token, may ``complete`` or
``release`` it. A record whose TTL has passed is treated as absent even before it is
purged.

The records a store answers with live in :mod:`~idempotency.stores.records`, the
mapping of its failures to the library's errors in :mod:`~idempotency.utils.outages`;
both are importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, ClassVar, ParamSpec, TypeVar

from asgiref.sync import sync_to_async

from idempotency.stores.records import (
    ClaimStatus,
    KeyState,
    StoredResponse,
    new_fence,
    now_ms,
    quota_window,
)
from idempotency.utils.backends import BackendHandler, Configurable
from idempotency.utils.outages import corrupted, store_operation, unreadable_record

__all__ = [
    "AtomicStore",
    "BaseStore",
    "ClaimLocked",
    "ClaimStatus",
    "KeyState",
    "StoredResponse",
    "configured_database",
    "corrupted",
    "database_aliases",
    "get_store",
    "new_fence",
    "now_ms",
    "quota_window",
    "store_operation",
    "stores",
    "unreadable_record",
]

P = ParamSpec("P")
R = TypeVar("R")


class BaseStore(Configurable):
    """A store of idempotency records, as the engine (:mod:`idempotency.core.engine`) uses
    it; see the module docstring for the contract.

    A subclass implements the methods of the first section; the engine calls nothing else
    without a default here. Every operation has an ``async`` twin named
    ``a<operation>`` (:meth:`aclaim`, :meth:`alookup`, :meth:`apeek`, :meth:`acomplete`,
    :meth:`arelease`, :meth:`aextend`, :meth:`asave_recovery_point`, :meth:`adelete`,
    :meth:`acount_new_record`) with the same arguments, answers and errors, as Django's
    ``BaseCache`` has ``aget`` beside ``get``. By default a twin runs its sync method in a
    thread of the event loop's default executor (:meth:`run_in_thread`), never in the one
    thread ``thread_sensitive=True`` would funnel every request of the process through. A
    store with a native async client overrides the twins
    (:class:`~idempotency.stores.redis.RedisStore` does); they must keep the contract of their
    sync methods, and be safe to call from several event loops in turn (one client per
    running loop, never a connection shared between two loops).

    A store is configured as an alias of ``IDEMPOTENCY["STORES"]``: its class attribute
    ``options`` lists the ``OPTIONS`` it takes, passed to its constructor as keyword
    arguments.
    """

    #: Whether lease mode should look a key up before claiming it. Where a claim that
    #: meets a completed record costs a second statement to read it (the database), a
    #: replay is then one statement; where the claim answers with the record (Redis),
    #: the claim alone is cheapest.
    lookup_before_claim: ClassVar[bool] = False

    # -- methods subclasses must implement -------------------------------------------------

    def claim(
        self,
        scope: str,
        key: str,
        *,
        fingerprint: str,
        lease: float,
        ttl: float,
        method: str = "",
        route: str = "",
    ) -> KeyState:
        """Claim ``key`` in ``scope`` for a request whose fingerprint is ``fingerprint``: one
        atomic step, so of concurrent claims of a key exactly one wins. The answer:

        - ``CLAIMED``: the caller owns the key for ``lease`` seconds, proven by
          ``fence`` (pass it to :meth:`complete`, :meth:`release`, :meth:`extend` and
          :meth:`save_recovery_point`); a new record lives ``ttl`` seconds.
          ``taken_over`` when an earlier owner's lease had run out, whose recovery
          point comes with the claim.
        - ``COMPLETED``: a live record of the same fingerprint holds ``response``.
        - ``IN_PROGRESS``: another owner's lease is live; ``retry_after`` is what
          remains of it, in seconds.
        - ``MISMATCH``: the live record belongs to a request of another fingerprint.

        An expired record counts as absent. ``method`` and ``route`` are kept for the
        admin only.
        """
        raise NotImplementedError

    def lookup(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        """The live record's state as a :class:`KeyState` (never CLAIMED), or None when
        absent: what a waiting duplicate polls, and what a replay reads."""
        raise NotImplementedError

    def complete(
        self,
        scope: str,
        key: str,
        *,
        fence: int,
        response: StoredResponse,
        ttl: float,
        fingerprint: str = "",
    ) -> bool:
        """Store the response if ``fence`` still owns the key, to be replayed for ``ttl``
        seconds; False for a stale owner (whose lease ran out and whose key was taken
        over: it must never overwrite the new owner's record). ``fingerprint`` is the
        claim's, where the caller has it (the stored record is authenticated over it)."""
        raise NotImplementedError

    def release(self, scope: str, key: str, *, fence: int) -> bool:
        """Free the key if ``fence`` still owns it, so a retry runs again (an outcome that
        is not kept: a 5xx, an exception). A recorded recovery point is kept, its lease
        ended, so the retry resumes from it. False for a stale owner."""
        raise NotImplementedError

    def extend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
        """Keep-alive: renew the lease of a running owner to ``lease`` seconds from now (and
        the record's expiry to at least that) if ``fence`` still owns the live, in-progress
        record; False for a stale owner, a completed, released or expired record. A store
        that leaves it unimplemented has no keep-alive: a body must then end within its
        lease."""
        raise NotImplementedError

    def save_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        """Record a committed phase of multi-step work (``name`` and JSON ``data``), which a
        retry that takes the key over gets with its claim; False for a stale owner."""
        raise NotImplementedError

    def delete(self, scope: str, key: str) -> bool:
        """Remove a record whoever owns it (operators: the admin's release action); False
        when there was none."""
        raise NotImplementedError

    # -- methods subclasses may override ---------------------------------------------------

    def peek(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        """The cheapest look before a claim that itself handles every state of the key.

        Like :meth:`lookup`, except that None may also mean "not known here": the
        caller goes on to claim, and the claim answers for a record that exists. A
        store with a faster, partial source of answers (a response cache) consults only
        that one; the others look up.
        """
        return self.lookup(scope, key, fingerprint=fingerprint)

    def renewable(self) -> bool:
        """Whether a claim made now can be renewed from another thread (False where it is
        part of an open transaction, invisible to others until its commit)."""
        return True

    def count_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        """Count one new record of ``scope`` in the current fixed window of ``window``
        seconds, atomically (concurrent callers each get their own count): the count with
        this one, and the seconds left of the window. Needed only with ``MAX_NEW_RECORDS``
        (a store without it cannot enforce that limit)."""
        raise NotImplementedError(f"{type(self).__name__} cannot count new records")

    def atomic(self) -> AbstractContextManager[Any]:
        """The transaction atomic mode runs in (only an :class:`AtomicStore` has one)."""
        raise NotImplementedError(f"{type(self).__name__} does not support atomic mode")

    # -- async twins: the sync method in a thread unless the store has native async I/O

    async def run_in_thread(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """``func(*args, **kwargs)`` in a thread of the running loop's default executor
        (``sync_to_async(thread_sensitive=False)``, as Django's ``BaseCache`` a*
        methods would if they did not share one thread): what every default ``a*`` twin
        runs its sync method in. A store whose sync calls need care in such threads
        (:class:`~idempotency.stores.database.DatabaseStore`: its connection per thread) overrides
        this one method."""
        return await sync_to_async(func, thread_sensitive=False)(*args, **kwargs)

    async def aclaim(
        self,
        scope: str,
        key: str,
        *,
        fingerprint: str,
        lease: float,
        ttl: float,
        method: str = "",
        route: str = "",
    ) -> KeyState:
        """:meth:`claim`, awaitable."""
        return await self.run_in_thread(
            self.claim,
            scope,
            key,
            fingerprint=fingerprint,
            lease=lease,
            ttl=ttl,
            method=method,
            route=route,
        )

    async def alookup(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        """:meth:`lookup`, awaitable."""
        return await self.run_in_thread(self.lookup, scope, key, fingerprint=fingerprint)

    async def apeek(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        """:meth:`peek`, awaitable."""
        return await self.run_in_thread(self.peek, scope, key, fingerprint=fingerprint)

    async def acomplete(
        self,
        scope: str,
        key: str,
        *,
        fence: int,
        response: StoredResponse,
        ttl: float,
        fingerprint: str = "",
    ) -> bool:
        """:meth:`complete`, awaitable."""
        return await self.run_in_thread(
            self.complete,
            scope,
            key,
            fence=fence,
            response=response,
            ttl=ttl,
            fingerprint=fingerprint,
        )

    async def arelease(self, scope: str, key: str, *, fence: int) -> bool:
        """:meth:`release`, awaitable."""
        return await self.run_in_thread(self.release, scope, key, fence=fence)

    async def aextend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
        """:meth:`extend`, awaitable."""
        return await self.run_in_thread(self.extend, scope, key, fence=fence, lease=lease)

    async def asave_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        """:meth:`save_recovery_point`, awaitable."""
        return await self.run_in_thread(
            self.save_recovery_point, scope, key, fence=fence, name=name, data=data
        )

    async def adelete(self, scope: str, key: str) -> bool:
        """:meth:`delete`, awaitable."""
        return await self.run_in_thread(self.delete, scope, key)

    async def acount_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        """:meth:`count_new_record`, awaitable."""
        return await self.run_in_thread(self.count_new_record, scope, window=window)


class ClaimLocked(Exception):
    """A claim's lock wait on a concurrent duplicate's claim ended without the lock:
    ``LOCK_TIMEOUT`` (or the server's own bound) ran out, or (``deadlock``) the server
    chose it as a deadlock's victim. Nothing ran; the caller answers "in progress"."""

    def __init__(self, *, deadlock: bool = False) -> None:
        super().__init__()
        self.deadlock = deadlock


class AtomicStore(BaseStore):
    """A store whose records live in a Django database, so the claim, the work's own writes
    and the stored outcome can commit in one transaction: atomic mode.

    The engine (:mod:`idempotency.core.engine`) runs atomic mode on a store that is an
    instance of this class, and lease mode on any other.
    :class:`~idempotency.stores.database.DatabaseStore` is the one.
    """

    # -- methods subclasses must implement (beyond BaseStore's) ----------------------------

    @property
    def using(self) -> str:
        """The database alias of the records."""
        raise NotImplementedError

    def atomic(self) -> AbstractContextManager[Any]:
        """A transaction on the records' database."""
        raise NotImplementedError

    def transaction(self, aliases: list[str]) -> AbstractContextManager[None]:
        """One transaction over ``aliases`` (the records' database first, then every alias
        the work writes to), so a rollback leaves nothing behind in any of them."""
        raise NotImplementedError

    def roll_back(self, aliases: list[str]) -> None:
        """Mark the open transaction over ``aliases`` for rollback (a released outcome:
        nothing of the attempt may stay, or a retry would double it)."""
        raise NotImplementedError

    def outermost(self) -> bool:
        """Whether a transaction opened now is the outermost one on the records' database
        (under ``ATOMIC_REQUESTS`` it is nested in the request's): only then may a
        deadlock's victim start again."""
        raise NotImplementedError

    def claim_in_transaction(
        self,
        scope: str,
        key: str,
        *,
        fingerprint: str,
        lease: float,
        ttl: float,
        method: str = "",
        route: str = "",
    ) -> KeyState:
        """:meth:`claim` inside the open transaction, its wait on a concurrent duplicate's
        claim bounded by ``LOCK_TIMEOUT``; a lock wait that ends without the lock raises
        :class:`ClaimLocked`."""
        raise NotImplementedError

    def bound_lock_waits(self) -> None:
        """Cap lock waits in the open transaction at ``LOCK_TIMEOUT`` (for the optimistic
        claim's insert, :meth:`insert_completed`)."""
        raise NotImplementedError

    def insert_completed(
        self,
        scope: str,
        key: str,
        *,
        fingerprint: str,
        response: StoredResponse,
        ttl: float,
        method: str = "",
        route: str = "",
    ) -> bool:
        """Insert a completed record in the open transaction (the optimistic claim, after
        the work ran); False when a live record already holds the key (a concurrent
        duplicate committed first)."""
        raise NotImplementedError


#: The configured stores by alias (``IDEMPOTENCY["STORES"]``), as ``django.core.cache.caches``:
#: ``stores["redis"]``, ``stores.all()``.
stores: BackendHandler[BaseStore] = BackendHandler("STORES", "store", lambda: BaseStore)


def get_store(store: str | BaseStore | None = None) -> BaseStore:
    """The store ``store`` names: an alias of ``IDEMPOTENCY["STORES"]``, a store instance
    (returned as it is) or None (the ``"default"`` alias).

    Raises:
        django.core.exceptions.ImproperlyConfigured: No such alias, or its entry cannot
            be used (the system checks report the same at startup).
        TypeError: ``store`` is neither an alias nor a store.
    """
    return stores.get(store)


def database_aliases() -> list[str]:
    """The aliases of ``STORES`` whose store keeps its records in a Django database (an
    :class:`AtomicStore`: the database store), ``"default"`` first."""
    aliases = sorted(stores.entries, key=lambda alias: alias != "default")
    found = []
    for alias in aliases:
        cls = stores.backend_class(alias)
        if cls is not None and issubclass(cls, AtomicStore):
            found.append(alias)
    return found


def configured_database() -> str:
    """The database of the first configured database store (``"default"`` first), else
    ``"default"``: where the purge, the metrics and the scope renaming look by default."""
    for alias in database_aliases():
        store = stores[alias]
        if isinstance(store, AtomicStore):
            return store.using
    return "default"
