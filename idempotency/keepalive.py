"""Keep-alive: a live owner keeps its lease while its body runs (lease mode).

A lease exists for the owner that dies: when it runs out, the next retry takes the key
over. A body that merely runs longer than its lease must not lose its key to a retry,
or the work runs twice. So while the body runs, a daemon thread renews the lease every
third of it (:meth:`~idempotency.stores.base.BaseStore.extend`, fenced by the owner's
token, as Redisson's lock watchdog does). It stops when the body ends; when the process
dies it dies with it, and the lease runs out one lease period after its last renewal.

A renewal refused (the fence is stale: the record was taken over, completed by someone
else, deleted by an operator, or it expired) ends the keep-alive, logged and signalled
``stale_owner``; the body's completion is then refused as any stale owner's is. A
renewal that fails (the store unreachable) is logged and retried on the next tick: the
lease still has two thirds of its length to run, and while the store is unreachable no
retry can claim the key either.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections

from idempotency import signals
from idempotency.outages import bursts
from idempotency.stores.base import BaseStore

logger = logging.getLogger("idempotency")

#: Renewals per lease period: the lease survives two missed renewals.
RENEWALS_PER_LEASE = 3
#: Longest wait for the keep-alive thread to finish a renewal in flight when the body ends.
STOP_TIMEOUT = 5.0


class KeepAlive:
    """Renews ``(scope, key)``'s lease for the owner holding ``fence`` until stopped."""

    def __init__(
        self, store: BaseStore, scope: str, key: str, *, fence: int, lease: float, owner: str
    ) -> None:
        self.store = store
        self.scope = scope
        self.key = key
        self.fence = fence
        self.lease = lease
        self.owner = owner
        self.interval = max(lease / RENEWALS_PER_LEASE, 0.01)
        self.renewals = 0
        self.failures = 0
        #: The lease was found taken over (or the record gone): the owner lost the key.
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"idempotency-keepalive:{key[:40]}", daemon=True
        )

    def start(self) -> KeepAlive:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(STOP_TIMEOUT)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                if not self._renew():
                    return
        finally:
            connections.close_all()  # this thread's own database connections

    def _renew(self) -> bool:
        """One renewal; False when the keep-alive must end."""
        try:
            renewed = self.store.extend(self.scope, self.key, fence=self.fence, lease=self.lease)
        except NotImplementedError:
            return False  # a store without keep-alive: the lease alone decides
        except Exception as exc:  # noqa: BLE001 - the body goes on; the next tick retries
            self.failures += 1
            bursts.log(
                "keepalive",
                "idempotency: the keep-alive of %s/%s could not renew its lease (%s: %s); "
                "retrying in %.1f s",
                self.scope,
                self.key,
                type(exc).__name__,
                exc,
                self.interval,
            )
            return True
        if renewed:
            self.renewals += 1
            return True
        if self._stop.is_set():
            return False  # the body ended meanwhile: its completion answers for it
        self.lost = True
        logger.warning(
            "idempotency: %s lost the lease of %s/%s while running (fence %s): the key was "
            "taken over, completed, deleted or expired; its result will not be stored",
            self.owner,
            self.scope,
            self.key,
            self.fence,
        )
        signals.stale_owner.send(
            sender=type(self.store), request=None, scope=self.scope, key=self.key, fence=self.fence
        )
        return False


@contextmanager
def kept_alive(
    store: BaseStore, scope: str, key: str, *, fence: int, lease: float, owner: str
) -> Iterator[KeepAlive | None]:
    """Renew the lease while the block runs (None where the claim cannot be renewed from
    another thread: inside an open transaction, nobody else can see it anyway)."""
    if not store.renewable():
        yield None
        return
    keeper = KeepAlive(store, scope, key, fence=fence, lease=lease, owner=owner).start()
    try:
        yield keeper
    finally:
        keeper.stop()


def keep_call_alive(call: Any, claim: Any) -> Any:
    """:func:`kept_alive` for a keyed call of :mod:`idempotency.calls` (lease mode only)."""
    from contextlib import nullcontext

    if call.atomic:
        return nullcontext()
    return kept_alive(
        call.store, call.scope, call.key, fence=claim.fence, lease=call.lease, owner=call.owner
    )
