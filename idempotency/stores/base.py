"""The contract every store keeps.

A record is identified by ``(scope, key)``. ``claim`` decides atomically which
caller owns a new key; only the owner, proven by its fencing token, may
``complete`` or ``release`` it. A record whose TTL has passed is treated as
absent even before it is purged.
"""

from __future__ import annotations

import enum
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Concatenate, NamedTuple, ParamSpec, TypeVar

from asgiref.sync import sync_to_async

from idempotency.core import json_codec
from idempotency.core.outages import is_outage, unavailable, wrap_errors

logger = logging.getLogger("idempotency")

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="BaseStore")


class StoredResponse(NamedTuple):
    """What replay needs: status, allow-listed headers and the exact body bytes.

    An immutable record (a named tuple: built in a third of a frozen dataclass's time,
    and one is built for every replay and every stored response)."""

    status: int
    headers: Sequence[tuple[str, str]] = ()
    body: bytes = b""

    def headers_json(self) -> str:
        return json_codec.dumps(self.headers)

    @classmethod
    def from_parts(
        cls, status: int, headers: Any, body: bytes | memoryview | None
    ) -> StoredResponse:
        if isinstance(headers, str):
            headers = json_codec.loads(headers)
        return cls(
            int(status),
            [(str(k), str(v)) for k, v in (headers or ())],
            bytes(body or b""),
        )


class ClaimStatus(enum.Enum):
    CLAIMED = "claimed"  # the caller owns the key now and must complete or release it
    COMPLETED = "completed"  # a stored response exists: replay it
    IN_PROGRESS = "in_progress"  # someone else owns a live lease
    MISMATCH = "mismatch"  # the key is live with another request's fingerprint


class Claim(NamedTuple):
    """A store's answer about a key: who owns it, or what its record holds.

    An immutable record (a named tuple: built in a third of a frozen dataclass's time,
    and every claim, lookup and replay builds one)."""

    status: ClaimStatus
    #: The fencing token that proves ownership (CLAIMED only).
    fence: int = 0
    #: The stored response to replay (COMPLETED only).
    response: StoredResponse | None = None
    #: The last recovery point of an earlier owner (CLAIMED after a take-over, IN_PROGRESS).
    recovery_point: str = ""
    recovery_data: Any = None
    #: Seconds left of the owner's lease (IN_PROGRESS only).
    retry_after: float = 0.0
    #: True when the key was taken over (CLAIMED only) from an owner whose lease ran
    #: out; it may have crashed after its effect, before its record.
    taken_over: bool = False
    #: MISMATCH only, where the store knows it: the fingerprint of the live record.
    fingerprint: str = ""
    #: COMPLETED only, where the store knows it: when the record expires (epoch seconds).
    expires_at: float | None = None

    @property
    def owned(self) -> bool:
        return self.status is ClaimStatus.CLAIMED


#: Fencing tokens' own generator, seeded from ``os.urandom`` and again in every forked
#: child (two workers forked from one parent must not draw the same tokens), never
#: from what an application does to the ``random`` module (``random.seed(0)`` in two
#: processes would give them the same tokens). A token must be unique, not secret: it
#: never leaves the server. ``secrets.randbits`` asked the kernel on every claim (about
#: 1 µs here, against 0.1 µs).
_fences = random.Random()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fences.seed)


def new_fence() -> int:
    """A fencing token unique per claim (63 random bits: fits a signed BIGINT)."""
    return _fences.getrandbits(63) or 1


def now_ms() -> int:
    return int(time.time() * 1000)


def _unreadable(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a value under a record's key that is not a record: Redis'
    WRONGTYPE (a string where a hash should be), or fields that do not parse."""
    if type(exc).__name__ == "ResponseError":  # redis-py, not imported here
        return "WRONGTYPE" in str(exc)
    return isinstance(exc, ValueError | TypeError | KeyError | IndexError)


def corrupted(store: object, scope: str, key: str, exc: Exception) -> Exception | None:
    """The :class:`~idempotency.exceptions.StoreCorrupted` to raise for ``exc`` (logged
    with the record's hashed name) when it comes from a value under the record's key
    that is not a record; None for any other error."""
    # imported here, on the error path: not on every store call
    from idempotency.exceptions import IdempotencyError

    if isinstance(exc, IdempotencyError) or not _unreadable(exc):
        return None
    return unreadable_record(type(store).__name__, scope, key, f"{type(exc).__name__}: {exc}")


def unreadable_record(where: str, scope: str, key: str, reason: str) -> Exception:
    """A :class:`~idempotency.exceptions.StoreCorrupted` for the record of ``(scope,
    key)``, logged as an error under its hashed name
    (:func:`idempotency.core.keyed_hashes.log_ref`): logs never carry a raw key or scope."""
    from idempotency.core.keyed_hashes import log_ref
    from idempotency.exceptions import StoreCorrupted

    ref = log_ref(scope, key)
    logger.error(
        "idempotency: the record %s in %s is unreadable (%s); nothing ran. Delete the "
        "value under its key, or use another KEY_PREFIX.",
        ref,
        where,
        reason,
    )
    return StoreCorrupted(
        f"The idempotency record {ref} is unreadable, so nothing was run.",
        scope=scope,
        key=key,
    )


def guarded(
    backend: str,
) -> Callable[[Callable[Concatenate[S, str, str, P], R]], Callable[Concatenate[S, str, str, P], R]]:
    """Decorate a store method of ``(scope, key, ...)``, sync or ``async``: a value under
    the record's key that is not a record raises
    :class:`~idempotency.exceptions.StoreCorrupted` (logged with the key; the caller's
    work does not run), an outage of ``backend``
    :class:`~idempotency.exceptions.StoreUnavailable` as
    :func:`~idempotency.core.outages.guard` raises it, anything else passes through. One
    wrapper for both: every claim and completion goes through it."""

    def decorate(
        method: Callable[Concatenate[S, str, str, P], R],
    ) -> Callable[Concatenate[S, str, str, P], R]:
        operation = method.__name__

        def problem(self: S, args: tuple[Any, ...], exc: Exception) -> Exception | None:
            scope, key = str(args[0]), str(args[1])
            found = corrupted(self, scope, key, exc)
            if found is None and is_outage(exc):
                found = unavailable(
                    backend, operation, exc, sender=type(self), scope=scope, key=key
                )
            return found

        return wrap_errors(method, problem)

    return decorate


class BaseStore:
    """Interface of a store; see the module docstring for the contract.

    Every operation has an ``async`` twin named ``a<operation>`` (:meth:`aclaim`,
    :meth:`alookup`, :meth:`apeek`, :meth:`acomplete`, :meth:`arelease`, :meth:`aextend`,
    :meth:`asave_recovery_point`, :meth:`adelete`, :meth:`acount_new_record`) with the
    same arguments, answers and errors, as Django's ``BaseCache`` has ``aget`` beside
    ``get``. By default a twin runs its sync method in a thread of the event loop's
    default executor (:meth:`run_in_thread`), never in the one thread
    ``thread_sensitive=True`` would funnel every request of the process through. A store
    with a native async client overrides the twins (:class:`~idempotency.stores.RedisStore`
    does); they must keep the contract of their sync methods, and be safe to call from
    several event loops in turn (one client per running loop, never a connection
    shared between two loops).
    """

    #: Whether the store can claim inside the view's own database transaction.
    supports_atomic: ClassVar[bool] = False
    #: Whether lease mode should look a key up before claiming it. Where a claim that
    #: meets a completed record costs a second statement to read it (the database), a
    #: replay is then one statement; where the claim answers with the record (Redis),
    #: the claim alone is cheapest.
    lookup_before_claim: ClassVar[bool] = False

    def atomic(self) -> AbstractContextManager[Any]:
        """The transaction atomic mode runs in (only where ``supports_atomic``)."""
        raise NotImplementedError(f"{type(self).__name__} does not support atomic mode")

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
    ) -> Claim:
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

    def lookup(self, scope: str, key: str, *, fingerprint: str) -> Claim | None:
        """The live record's state as a :class:`Claim` (never CLAIMED), or None when absent."""
        raise NotImplementedError

    def peek(self, scope: str, key: str, *, fingerprint: str) -> Claim | None:
        """The cheapest look before a claim that itself handles every state of the key.

        Like :meth:`lookup`, except that None may also mean "not known here": the
        caller goes on to claim, and the claim answers for a record that exists. A
        store with a faster, partial source of answers (a response cache) consults only
        that one; the others look up.
        """
        return self.lookup(scope, key, fingerprint=fingerprint)

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
        """Store the response if ``fence`` still owns the key; False for a stale owner."""
        raise NotImplementedError

    def release(self, scope: str, key: str, *, fence: int) -> bool:
        """Free the key if ``fence`` still owns it (a recorded recovery point is kept)."""
        raise NotImplementedError

    def extend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
        """Keep-alive: renew the lease of a running owner to ``lease`` seconds from now (and
        the record's expiry to at least that) if ``fence`` still owns the live, in-progress
        record; False for a stale owner, a completed, released or expired record. Stores
        that do not implement it have no keep-alive: a body must then end within its
        lease."""
        raise NotImplementedError

    def renewable(self) -> bool:
        """Whether a claim made now can be renewed from another thread (False where it is
        part of an open transaction, invisible to others until its commit)."""
        return True

    def save_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        """Record a committed phase of multi-step work; False for a stale owner."""
        raise NotImplementedError

    def delete(self, scope: str, key: str) -> bool:
        """Remove a record whoever owns it (operators: the admin's release action)."""
        raise NotImplementedError

    def count_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        """Count one new record of ``scope`` in the current fixed window of ``window``
        seconds, atomically (concurrent callers each get their own count): the count with
        this one, and the seconds left of the window. Needed only with ``MAX_NEW_RECORDS``
        (a store without it cannot enforce that limit)."""
        raise NotImplementedError(f"{type(self).__name__} cannot count new records")

    # -- async twins: the sync method in a thread unless the store has native async I/O

    async def run_in_thread(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """``func(*args, **kwargs)`` in a thread of the running loop's default executor
        (``sync_to_async(thread_sensitive=False)``, as Django's ``BaseCache`` a*
        methods would if they did not share one thread): what every default ``a*`` twin
        runs its sync method in. A store whose sync calls need care in such threads
        (:class:`~idempotency.stores.DatabaseStore`: its connection per thread) overrides
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
    ) -> Claim:
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

    async def alookup(self, scope: str, key: str, *, fingerprint: str) -> Claim | None:
        """:meth:`lookup`, awaitable."""
        return await self.run_in_thread(self.lookup, scope, key, fingerprint=fingerprint)

    async def apeek(self, scope: str, key: str, *, fingerprint: str) -> Claim | None:
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


def quota_window(window: float, now: float) -> tuple[int, float]:
    """The fixed window of ``window`` seconds ``now`` falls in: its start (whole epoch
    seconds, the counter's name) and the seconds left of it."""
    start = int(now // window * window)
    return start, max(0.001, start + window - now)
