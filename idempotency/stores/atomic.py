"""What atomic mode asks of a store: its records live in a Django database, so the claim,
the work's own writes and the stored outcome can commit in one transaction.

:class:`AtomicStore` is that capability as a type: the engine
(:mod:`idempotency.core.engine`) runs atomic mode on a store that is an instance of it,
and lease mode on any other. :class:`~idempotency.stores.DatabaseStore` is one. A
subclass provides ``using`` (its database alias), :meth:`~AtomicStore.atomic` and
:meth:`~AtomicStore.insert_completed`; the transaction handling below is shared.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, ClassVar

from django.db import DatabaseError, OperationalError, connections, transaction

from idempotency.conf import idempotency_settings
from idempotency.core.outages import is_deadlock, is_lock_error
from idempotency.stores.base import BaseStore, Claim, StoredResponse
from idempotency.stores.savepoints import batched_releases


class ClaimLocked(Exception):
    """A claim's lock wait on a concurrent duplicate's claim ended without the lock:
    ``LOCK_TIMEOUT`` (or the server's own bound) ran out, or (``deadlock``) the server
    chose it as a deadlock's victim. Nothing ran; the caller answers "in progress"."""

    def __init__(self, *, deadlock: bool = False) -> None:
        super().__init__()
        self.deadlock = deadlock


class AtomicStore(BaseStore):
    """A store whose records share a transaction with the work (atomic mode)."""

    supports_atomic: ClassVar[bool] = True

    @property
    def using(self) -> str:
        """The database alias of the records."""
        raise NotImplementedError

    def atomic(self) -> contextlib.AbstractContextManager[Any]:
        """A transaction on the records' database."""
        return transaction.atomic(using=self.using)

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
        """Insert a completed record in the open transaction; False when a live record
        already holds the key (a concurrent duplicate committed first)."""
        raise NotImplementedError

    # -- the transaction of one keyed run ----------------------------------------------

    def outermost(self) -> bool:
        """Whether a transaction opened now is the outermost one on the records' database
        (under ``ATOMIC_REQUESTS`` it is nested in the request's)."""
        return not connections[self.using].in_atomic_block

    @contextmanager
    def transaction(self, aliases: list[str]) -> Iterator[None]:
        """One transaction over ``aliases`` (the records' database first, then every
        alias the work writes to), so a rollback leaves nothing behind in any of them."""
        if len(aliases) == 1:  # most views: no ExitStack (its callbacks cost every request)
            with transaction.atomic(using=aliases[0]), batched_releases(aliases):
                yield
            return
        with ExitStack() as stack:
            for alias in aliases:
                stack.enter_context(transaction.atomic(using=alias))
            stack.enter_context(batched_releases(aliases))
            yield

    @staticmethod
    def roll_back(aliases: list[str]) -> None:
        """Mark the open transaction over ``aliases`` for rollback (a released outcome:
        nothing of the attempt may stay, or a retry would double it)."""
        for alias in aliases:
            transaction.set_rollback(True, using=alias)

    def _lock_timeout(self) -> str | None:
        """``LOCK_TIMEOUT`` as PostgreSQL's ``lock_timeout`` value, or None where it does
        not apply (not set, or not PostgreSQL)."""
        timeout = idempotency_settings.LOCK_TIMEOUT
        if timeout is None or connections[self.using].vendor != "postgresql":
            return None
        return f"{max(1, int(timeout * 1000))}ms"

    def bound_lock_waits(self) -> None:
        """Cap lock waits in the open transaction at ``LOCK_TIMEOUT`` (PostgreSQL): the
        optimistic claim's insert then answers "in progress" instead of waiting long for
        a concurrent duplicate's commit. Off by default: a statement per request, and it
        also bounds the work's own lock waits."""
        timeout = self._lock_timeout()
        if timeout is not None:
            with connections[self.using].cursor() as cursor:
                cursor.execute("SELECT set_config('lock_timeout', %s, true)", [timeout])

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
    ) -> Claim:
        """:meth:`claim` inside the open transaction. With ``LOCK_TIMEOUT`` only the wait
        on a concurrent duplicate's claim is bounded (lifted again before the work runs):
        PostgreSQL's ``lock_timeout`` for this transaction, MySQL's
        ``innodb_lock_wait_timeout`` for the session (whole seconds), put back after.
        A lock wait that ends without the lock raises :class:`ClaimLocked`."""
        connection = connections[self.using]
        timeout = idempotency_settings.LOCK_TIMEOUT
        vendor = connection.vendor if timeout is not None else ""
        previous = None
        if vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)",
                    [self._lock_timeout()],
                )
                previous = cursor.fetchone()[0]
        elif vendor == "mysql" and timeout is not None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SET @idempotency_lock_wait = @@SESSION.innodb_lock_wait_timeout,"
                    " SESSION innodb_lock_wait_timeout = %s",
                    [max(1, math.ceil(timeout))],
                )
        try:
            claimed = self.claim(
                scope,
                key,
                fingerprint=fingerprint,
                lease=lease,
                ttl=ttl,
                method=method,
                route=route,
            )
        except OperationalError as exc:
            if is_lock_error(exc):
                raise ClaimLocked(deadlock=is_deadlock(exc)) from exc
            raise
        finally:
            if vendor == "mysql":
                with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
                    # a session setting: it would outlive the transaction on this connection
                    cursor.execute("SET SESSION innodb_lock_wait_timeout = @idempotency_lock_wait")
        if vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])
        return claimed


__all__ = ["AtomicStore", "ClaimLocked"]
