"""The base classes of lock backends: a :class:`LockBackend` makes a :class:`Holding`
for each lock taken."""

from __future__ import annotations

import abc
import copy
from collections.abc import Mapping
from typing import Any, ClassVar

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from idempotency.conf import Setting
from idempotency.core.backends import Configurable


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
    :mod:`idempotency.core.backends`), once
    per process (until the settings change), and shared by every thread. Built in:
    ``idempotency.locks.RedisLockBackend`` (the default),
    ``idempotency.locks.PostgresLockBackend`` and ``idempotency.locks.MySQLLockBackend``.

    Methods subclasses must implement: :meth:`holding`.
    """

    @abc.abstractmethod
    def holding(self, name: str, timeout: float | None) -> Holding:
        """A new :class:`Holding` of the lock ``name``, not taken yet; it frees itself
        ``timeout`` seconds after it is taken (None: only a release frees it)."""


class DatabaseLockBackend(LockBackend):
    """A lock backend whose locks live in the sessions of its ``database``, each on a
    connection of its own (:meth:`new_connection`)."""

    #: ``connection.vendor`` of the database these locks need, and the backend's name.
    vendor = ""
    name = ""
    #: ``OPTIONS`` of a database lock backend (:mod:`idempotency.core.backends`).
    options: ClassVar[Mapping[str, Setting]] = {
        "database": Setting("default", "Database alias whose sessions hold the locks.", "database"),
    }

    def __init__(self, *, database: str = "default") -> None:
        #: The database alias whose sessions hold the locks.
        self.alias = database

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
            f"is {template.vendor}. Configure IDEMPOTENCY['LOCKS'] with RedisLockBackend."
        )
    settings_dict = copy.deepcopy(template.settings_dict)
    options = dict(settings_dict.get("OPTIONS") or {})
    options.pop("pool", None)
    settings_dict["OPTIONS"] = options
    connection = type(template)(settings_dict, alias)
    # the lock may be released from another thread than the one that took it
    connection.inc_thread_sharing()
    return connection
