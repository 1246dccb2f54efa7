"""Keep-alive: a live owner keeps its lease while its body runs (lease mode).

A lease exists for the owner that dies: when it runs out, the next retry takes the key
over. A body that merely runs longer than its lease must not lose its key to a retry,
or the work runs twice. So while the body runs, its lease is renewed every third of it
(:meth:`~idempotency.stores.base.BaseStore.extend`, fenced by the owner's token, as
Redisson's lock watchdog does). When the process dies the renewals die with it, and the
lease runs out one lease period after the last one.

One watchdog thread per process keeps the schedule of every live owner and hands the
renewals that fall due to a small pool of threads (a store that hangs on one renewal
does not hold up the others). Most bodies end long before their first renewal: for them
the keep-alive is an entry put in the schedule and taken out, with no thread started.

A renewal refused (the fence is stale: the record was taken over, completed by someone
else, deleted by an operator, or it expired) ends the keep-alive, logged and signalled
``stale_owner``; the body's completion is then refused as any stale owner's is. A
renewal that fails (the store unreachable) is logged and retried on the next tick: the
lease still has two thirds of its length to run, and while the store is unreachable no
retry can claim the key either.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from django.db import connections

from idempotency import signals
from idempotency.stores.base import BaseStore
from idempotency.utils.hashing import log_ref
from idempotency.utils.outages import bursts

logger = logging.getLogger("idempotency")

#: Renewals per lease period: the lease survives two missed renewals.
RENEWALS_PER_LEASE = 3
#: Longest wait for a renewal in flight to finish when the body ends.
STOP_TIMEOUT = 5.0
#: Renewals that may run at once (each in its own thread of the pool).
RENEWAL_THREADS = 8
#: The name of the watchdog thread; its pool's threads start with it.
THREAD_NAME = "idempotency-keepalive"


class KeepAlive:
    """Renews ``(scope, key)``'s lease for the owner holding ``fence`` until stopped."""

    # one is made for every lease-mode request: no instance dict to build and grow
    __slots__ = (
        "store",
        "scope",
        "key",
        "fence",
        "lease",
        "owner",
        "interval",
        "renewals",
        "failures",
        "lost",
        "stopped",
        "_renewing",
        "_renewer",
        "_renewed",
    )

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
        self.stopped = False
        self._renewing = False
        self._renewer = 0  # the thread running a renewal (a receiver may stop it from there)
        #: Set when the renewal in flight ends, for a stop() that waits for it; made only
        #: then. Every keep-alive shares one plain lock (``_state``) for its flags: one is
        #: made for every lease-mode request, and most never meet a renewal.
        self._renewed: threading.Event | None = None

    def start(self) -> KeepAlive:
        watchdog().watch(self, time.monotonic() + self.interval)
        return self

    def __enter__(self) -> KeepAlive:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """No renewal after this returns (one in flight is waited for, up to
        ``STOP_TIMEOUT``)."""
        renewal = None
        with _state:
            if self.stopped:
                return
            self.stopped = True
            if self._renewing and self._renewer != threading.get_ident():
                renewal = self._renewed = threading.Event()
        if renewal is not None:
            renewal.wait(STOP_TIMEOUT)
        watchdog().forget()

    def renew(self, due: float) -> float | None:
        """One renewal (the one ``due`` at that monotonic time), in a renewal thread; the
        next one's due time, or None when the keep-alive ends. The schedule keeps its
        rate: a slow renewal (a reconnect under load) does not push the next one back."""
        with _state:
            if self.stopped:
                return None
            self._renewing, self._renewer = True, threading.get_ident()
        try:
            go_on = self._renew()
        finally:
            connections.close_all()  # this thread's own connections: renewals are rare
            with _state:
                self._renewing = False
                if self._renewed is not None:
                    self._renewed.set()
        if not go_on or self.stopped:
            return None
        now = time.monotonic()
        return max(due + self.interval, now)

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
                "idempotency: the keep-alive of %s could not renew its lease (%s: %s); "
                "retrying in %.1f s",
                log_ref(self.scope, self.key),
                type(exc).__name__,
                exc,
                self.interval,
            )
            return True
        if renewed:
            self.renewals += 1
            return True
        if self.stopped:
            return False  # the body ended meanwhile: its completion answers for it
        self.lost = True
        logger.warning(
            "idempotency: %s lost the lease of %s while running (fence %s): the key was "
            "taken over, completed, deleted or expired; its result will not be stored",
            self.owner,
            log_ref(self.scope, self.key),
            self.fence,
        )
        signals.stale_owner.send(
            sender=type(self.store), request=None, scope=self.scope, key=self.key, fence=self.fence
        )
        return False


class Watchdog:
    """The process's schedule of renewals: a heap of (due, order, keep-alive), a thread
    that sleeps until the earliest is due, and the pool that runs it."""

    def __init__(self) -> None:
        # taken directly where nothing waits or is woken (``with`` on the Condition is
        # two Python calls more, on every lease-mode request)
        self._mutex = threading.Lock()
        self._lock = threading.Condition(self._mutex)
        self._due: list[tuple[float, int, KeepAlive]] = []
        self._order = itertools.count()
        self._live = 0
        self._thread: threading.Thread | None = None
        self._renewers = Renewers()

    @property
    def live(self) -> int:
        """Keep-alives started and not yet stopped."""
        return self._live

    def watch(self, keeper: KeepAlive, due: float) -> None:
        with self._mutex:
            self._live += 1
            self._push(keeper, due)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
                self._thread.start()

    def forget(self) -> None:
        """A keep-alive stopped: its entry is dropped when it falls due (or when stopped
        entries outnumber the live ones, all at once)."""
        with self._mutex:
            self._live -= 1
            if len(self._due) > 2 * self._live + 64:
                self._due = [entry for entry in self._due if not entry[2].stopped]
                heapq.heapify(self._due)

    def _push(self, keeper: KeepAlive, due: float) -> None:
        earliest = self._due[0][0] if self._due else None
        heapq.heappush(self._due, (due, next(self._order), keeper))
        if earliest is None or due < earliest:
            self._lock.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                while not self._due or self._due[0][0] > now:
                    self._lock.wait(self._due[0][0] - now if self._due else None)
                    now = time.monotonic()
                due, _order, keeper = heapq.heappop(self._due)
            if not keeper.stopped:
                self._renewers.submit(self._renew, keeper, due)

    def _renew(self, keeper: KeepAlive, due: float) -> None:
        after = keeper.renew(due)
        if after is not None:
            with self._lock:
                self._push(keeper, after)


class Renewers:
    """Up to ``RENEWAL_THREADS`` daemon threads, started as renewals need them, that run
    what the watchdog hands them (daemons: the renewals die with the process, and a
    renewal stuck on an unreachable store never holds its exit up)."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[
            tuple[Callable[[KeepAlive, float], None], KeepAlive, float]
        ] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(
        self, task: Callable[[KeepAlive, float], None], keeper: KeepAlive, due: float
    ) -> None:
        self._work.put((task, keeper, due))
        with self._lock:
            if self._idle or self._threads >= RENEWAL_THREADS:
                return
            self._threads += 1
        name = f"{THREAD_NAME}-renewal-{self._threads}"
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            task, keeper, due = self._work.get()
            with self._lock:
                self._idle -= 1
            try:
                task(keeper, due)
            except Exception:  # a bug here must not end the renewals of everyone else
                logger.exception("idempotency: a keep-alive renewal failed unexpectedly")


_watchdog: Watchdog | None = None
_created = threading.Lock()
#: Guards every keep-alive's ``stopped`` and ``_renewing`` flags.
_state = threading.Lock()


def watchdog() -> Watchdog:
    """This process's watchdog (a forked child starts its own: threads do not fork)."""
    global _watchdog
    if _watchdog is None:
        with _created:
            if _watchdog is None:
                _watchdog = Watchdog()
    return _watchdog


def _forget_after_fork() -> None:
    global _watchdog, _created, _state
    _watchdog, _created, _state = None, threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def kept_alive(
    store: BaseStore, scope: str, key: str, *, fence: int, lease: float, owner: str
) -> AbstractContextManager[KeepAlive | None]:
    """Renew the lease while the block runs (None where the claim cannot be renewed from
    another thread: inside an open transaction, nobody else can see it anyway). The
    keep-alive is its own context manager: no generator per request."""
    if not store.renewable():
        return nullcontext()
    return KeepAlive(store, scope, key, fence=fence, lease=lease, owner=owner)
