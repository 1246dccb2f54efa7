"""The base classes of lock backends: a :class:`LockBackend` makes a :class:`Holding`
for each lock taken."""

from __future__ import annotations

import abc
import copy
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connections


class Holding(abc.ABC):
    """One lock taken (or being tried) by one :class:`~idempotency.Lock`.

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


class LockBackend(abc.ABC):
    """Where locks live: the base class of every ``LOCK_BACKEND``.

    Name a subclass by its dotted path in ``LOCK_BACKEND`` (or pass it, a class or an
    instance as ``lock(..., backend=)``); a path or class is made with no arguments,
    once per process (until the settings change), and shared by every thread. Built in:
    ``RedisLockBackend`` (alias ``"redis"``),
    ``PostgresLockBackend`` (``"postgres"``,
    ``"postgresql"``) and ``MySQLLockBackend``
    (``"mysql"``, ``"mariadb"``).

    Methods subclasses must implement: :meth:`holding`.
    """

    @abc.abstractmethod
    def holding(self, name: str, timeout: float | None) -> Holding:
        """A new :class:`Holding` of the lock ``name``, not taken yet; it frees itself
        ``timeout`` seconds after it is taken (None: only a release frees it)."""


class DatabaseLockBackend(LockBackend):
    """A lock backend whose locks live in the sessions of the database ``using``
    (``DATABASE_ALIAS``), each on a connection of its own (:meth:`new_connection`)."""

    #: ``connection.vendor`` of the database these locks need, and the backend's name.
    vendor = ""
    name = ""

    def __init__(self, using: str | None = None) -> None:
        self.using = using

    @property
    def alias(self) -> str:
        from idempotency.conf import idempotency_settings

        return self.using or str(idempotency_settings.DATABASE_ALIAS)

    def new_connection(self) -> Any:
        """A fresh connection of ``alias`` outside Django's per-thread handler and any pool."""
        return dedicated_connection(self.alias, self.vendor, self.name)


def dedicated_connection(alias: str, vendor: str, backend: str) -> Any:
    """A fresh connection of the database ``alias`` outside Django's per-thread handler
    and any pool, for a lock held on its session (``backend`` names the lock backend that
    needs ``vendor``)."""
    template = connections[alias]
    if template.vendor != vendor:
        raise ImproperlyConfigured(
            f"The {backend} lock backend needs a {vendor} database; {alias!r} "
            f"is {template.vendor}. Use LOCK_BACKEND 'redis'."
        )
    settings_dict = copy.deepcopy(template.settings_dict)
    options = dict(settings_dict.get("OPTIONS") or {})
    options.pop("pool", None)
    settings_dict["OPTIONS"] = options
    connection = type(template)(settings_dict, alias)
    # the lock may be released from another thread than the one that took it
    connection.inc_thread_sharing()
    return connection
