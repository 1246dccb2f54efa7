"""Locks: the backend contract (:class:`LockBackend`, :class:`Holding`), the configured
backends by alias (:data:`lock_backends`), and :class:`Lock` and :func:`lock` over them."""

from __future__ import annotations

import abc
import functools
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async

from idempotency import signals
from idempotency.exceptions import LockNotAcquired, StoreUnavailable
from idempotency.utils.backends import BackendHandler, Configurable
from idempotency.utils.backoff import Backoff


class Holding(abc.ABC):
    """One lock taken (or being tried) by one :class:`~idempotency.locks.Lock`.

    Made by :meth:`LockBackend.holding` for one critical section, and used by one
    ``Lock`` at a time (possibly released from another thread than the one that took
    it). Every method may raise :class:`~idempotency.exceptions.StoreUnavailable` when
    the backend cannot be reached.

    Methods subclasses must implement: :meth:`try_acquire`, :meth:`release`,
    :meth:`extend` and :meth:`owned`. They may override :meth:`abandon`.
    """

    @abc.abstractmethod
    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it, without waiting: whether it was taken.
        Called again (after a pause) while the ``Lock`` waits."""

    @abc.abstractmethod
    def release(self) -> bool:
        """Free the lock: True when this holding still owned it, False when it had
        expired (its timeout passed; another owner's lock is left untouched)."""

    @abc.abstractmethod
    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        """Add ``additional`` seconds to the lock's remaining time (set it to that, with
        ``replace_ttl``): False when this holding no longer owns the lock."""

    @abc.abstractmethod
    def owned(self) -> bool:
        """Whether this holding still owns the lock (asks the backend)."""

    def abandon(self) -> None:  # noqa: B027 - optional: the default has nothing to free
        """Give up after failed attempts: free what trying needed (a connection). The
        default does nothing."""


class LockBackend(Configurable, abc.ABC):
    """Where locks live: the base class of every ``BACKEND`` of ``LOCKS``.

    Name a subclass by its dotted path as the ``BACKEND`` of an alias of
    ``IDEMPOTENCY["LOCKS"]`` (and the alias as ``lock(..., backend=)``, or pass an
    instance); it is made with its entry's ``LOCATION`` and ``OPTIONS`` as keyword
    arguments (its ``options`` and ``location_schemes`` say which it takes:
    :mod:`idempotency.utils.backends`), once
    per process (until the settings change), and shared by every thread. Built in:
    ``idempotency.locks.RedisLockBackend`` (the default),
    ``idempotency.locks.PostgresLockBackend`` and ``idempotency.locks.MySQLLockBackend``.

    Methods subclasses must implement: :meth:`holding`.
    """

    @abc.abstractmethod
    def holding(self, name: str, timeout: float | None) -> Holding:
        """A new :class:`Holding` of the lock ``name``, not taken yet; it frees itself
        ``timeout`` seconds after it is taken (None: only a release frees it)."""


logger = logging.getLogger("idempotency.locks")

F = TypeVar("F", bound=Callable[..., Any])

#: Longest pause between two attempts while waiting (seconds).
MAX_POLL_INTERVAL = 0.1
_FIRST_POLL_INTERVAL = 0.005
_DEFAULT: Any = object()


#: A lock backend as ``lock(backend=)`` takes it: an alias of ``LOCKS`` (None:
#: ``"default"``) or a backend instance.
BackendSpec = str | LockBackend | None

#: The lock backends by alias (``IDEMPOTENCY["LOCKS"]``), as ``caches``:
#: ``lock_backends["default"]``; each ``BACKEND`` a subclass of
#: :class:`~idempotency.locks.base.LockBackend`.
lock_backends: BackendHandler[LockBackend] = BackendHandler(
    "LOCKS", "lock backend", lambda: LockBackend
)


def get_backend(backend: BackendSpec = None) -> LockBackend:
    """The lock backend ``backend`` names: an alias of ``LOCKS`` (None: ``"default"``) or
    a backend instance, returned as it is.

    Raises:
        django.core.exceptions.ImproperlyConfigured: No such alias, or its entry cannot
            be used (the system checks report the same at startup).
    """
    return lock_backends.get(backend)


class Lock:
    """A named distributed lock (how it behaves: docs/howto/locks.md).

    One object holds the lock at most once at a time; use a new one (``lock(...)``)
    per critical section. As a decorator it takes a new lock for every call.
    """

    def __init__(
        self,
        name: str,
        *,
        timeout: float | None = 30.0,
        wait: float | None = 0.0,
        backend: BackendSpec = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("A lock needs a non-empty name")
        if timeout is not None and timeout <= 0:
            raise ValueError("A lock's timeout must be positive (or None)")
        self.name = name
        self.timeout = timeout
        self.wait = wait
        self.backend = backend
        self._holding: Holding | None = None

    def __repr__(self) -> str:
        state = "held" if self._holding is not None else "free"
        return f"<Lock {self.name!r} {state}>"

    def copy(self) -> Lock:
        return Lock(self.name, timeout=self.timeout, wait=self.wait, backend=self.backend)

    @property
    def held(self) -> bool:
        """Whether this object took the lock and has not released it (no server check)."""
        return self._holding is not None

    def acquire(self, *, wait: float | None = _DEFAULT) -> bool:
        """Take the lock, waiting up to ``wait`` seconds (default: the lock's ``wait``).

        True when taken, False when it stayed held by someone else.
        """
        if self._holding is not None:
            raise RuntimeError(f"{self!r} is already held by this object (locks are not reentrant)")
        wait = self.wait if wait is _DEFAULT else wait
        holding = get_backend(self.backend).holding(self.name, self.timeout)
        backoff = Backoff(wait, first=_FIRST_POLL_INTERVAL, cap=MAX_POLL_INTERVAL, jitter=True)
        try:
            while True:
                if holding.try_acquire():
                    self._holding = holding
                    return True
                if not backoff.pause():
                    holding.abandon()
                    return False
        except BaseException:
            holding.abandon()
            raise

    def release(self) -> bool:
        """Free the lock if this object still owns it.

        False (and a warning) when it does not: its timeout passed and the lock
        expired, possibly taken by another owner since, whose lock stays untouched.
        """
        holding, self._holding = self._holding, None
        if holding is None:
            return False
        try:
            released = holding.release()
        except StoreUnavailable:
            # the backend is gone: the lock ends with its timeout (Redis) or its session
            logger.warning("lock %r could not be released: its backend is unreachable", self.name)
            return False
        if not released:
            logger.warning(
                "lock %r was no longer held at release: its timeout (%s s) passed before the "
                "critical section ended, so another owner may have run concurrently",
                self.name,
                self.timeout,
            )
        return released

    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        """Add ``additional`` seconds to the lock's remaining time (or set it, ``replace_ttl``).

        False (and a warning) when this object no longer owns the lock.
        """
        if additional <= 0:
            raise ValueError("extend() needs a positive number of seconds")
        holding = self._holding
        if holding is None:
            return False
        extended = holding.extend(additional, replace_ttl=replace_ttl)
        if extended and self.timeout is not None:
            self.timeout = additional if replace_ttl else self.timeout + additional
        if not extended:
            logger.warning("lock %r could not be extended: it is no longer held", self.name)
        return extended

    def owned(self) -> bool:
        """Whether this object still owns the lock (asks the server)."""
        holding = self._holding
        return holding is not None and holding.owned()

    def _not_acquired(self) -> LockNotAcquired:
        signals.lock_not_acquired.send(sender=type(self), name=self.name)
        return LockNotAcquired(self.name, 0.0 if self.wait is None else float(self.wait))

    def __enter__(self) -> Lock:
        if not self.acquire():
            raise self._not_acquired()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    async def __aenter__(self) -> Lock:
        acquired = await sync_to_async(self.acquire)()
        if not acquired:
            raise self._not_acquired()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await sync_to_async(self.release)()

    def __call__(self, func: F) -> F:
        """Decorate ``func`` (sync or async): every call runs under a new lock of this name."""
        if not callable(func):
            raise TypeError(f"lock() decorates callables, got {func!r}")
        if iscoroutinefunction(func):

            async def async_locked(*args: Any, **kwargs: Any) -> Any:
                async with self.copy():
                    return await func(*args, **kwargs)

            wrapped: Any = functools.wraps(func)(async_locked)
            markcoroutinefunction(wrapped)
        else:

            def locked(*args: Any, **kwargs: Any) -> Any:
                with self.copy():
                    return func(*args, **kwargs)

            wrapped = functools.wraps(func)(locked)
        return cast(F, wrapped)  # F's own signature, sync or async: no TypeVar narrows to F


def lock(
    name: str,
    *,
    timeout: float | None = 30.0,
    wait: float | None = 0.0,
    backend: BackendSpec = None,
) -> Lock:
    """A distributed lock named ``name``: ``with lock(...)``, ``async with`` or ``@lock(...)``.

    Mutual exclusion across processes and hosts, not memory: it keeps two holders
    apart while one works, and remembers nothing afterwards.

    Args:
        name: What is locked; every holder of the same name excludes the others.
        timeout: Seconds the lock is held at most: a holder that dies (or hangs)
            frees it then; keep it above the critical section's longest run, or call
            :meth:`~idempotency.locks.Lock.extend`. None: only a release frees it.
        wait: Seconds to wait for a lock someone else holds, polling with jittered
            backoff; 0 (the default) tries once, None waits forever.
        backend: An alias of ``IDEMPOTENCY["LOCKS"]`` (default ``"default"``) or a
            :class:`~idempotency.locks.base.LockBackend` instance.

    Raises:
        LockNotAcquired: On entry, when the lock stayed held by someone else for
            ``wait`` seconds.
        StoreUnavailable: When the lock backend cannot be reached.
    """
    return Lock(name, timeout=timeout, wait=wait, backend=backend)
