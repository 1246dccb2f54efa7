"""What a lock backend provides: :class:`Holding` objects for lock names."""

from __future__ import annotations

import copy
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connections


class Holding:
    """One lock taken (or being tried) by one :class:`~idempotency.Lock`: what its backend needs."""

    def try_acquire(self) -> bool:
        raise NotImplementedError

    def release(self) -> bool:
        raise NotImplementedError

    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        raise NotImplementedError

    def owned(self) -> bool:
        raise NotImplementedError

    def abandon(self) -> None:
        """Give up after failed attempts (free what trying needed)."""


class LockBackend:
    """Makes :class:`Holding` objects for lock names."""

    def holding(self, name: str, timeout: float | None) -> Holding:
        raise NotImplementedError


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
            f"is {template.vendor}. Use LOCK_BACKEND='redis'."
        )
    settings_dict = copy.deepcopy(template.settings_dict)
    options = dict(settings_dict.get("OPTIONS") or {})
    options.pop("pool", None)
    settings_dict["OPTIONS"] = options
    connection = type(template)(settings_dict, alias)
    # the lock may be released from another thread than the one that took it
    connection.inc_thread_sharing()
    return connection
