"""A database store's statement that lost a lock wait: retried, or a clear 503.

:func:`busy` decorates :class:`~idempotency.stores.DatabaseStore`'s methods: a deadlock
or a lock wait that ran out is never a bare 500.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from django.db import OperationalError, connections

from idempotency.conf import idempotency_settings
from idempotency.core.outages import is_deadlock, is_lock_error
from idempotency.exceptions import StoreUnavailable

#: Attempts of a store statement chosen as a deadlock's victim outside a transaction.
DEADLOCK_ATTEMPTS = 3


class OnDatabase(Protocol):
    """What :func:`busy` needs of the store it decorates: its database alias."""

    @property
    def using(self) -> str: ...


S = TypeVar("S", bound=OnDatabase)
P = ParamSpec("P")
R = TypeVar("R")


def busy(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """A store call whose lock wait ended without the lock (a deadlock, MySQL's 1213 or
    PostgreSQL's 40P01; a lock wait timeout, 1205 or 55P03) is never a bare 500.

    Outside a transaction the statement alone was rolled back: a deadlock's victim is
    run again (up to :data:`DEADLOCK_ATTEMPTS` times, after a short jittered pause), and a
    lock wait that ran out, or a deadlock that keeps coming back, raises
    :class:`StoreUnavailable` (503 with ``Retry-After``: nothing ran, retry later).
    Inside one (atomic mode) the error goes to the transaction's owner, which answers it:
    the server may have rolled the whole transaction back, so only it can start again.

    Any other failure outside a transaction drops a connection the server closed (a
    restart, a killed session: ``close_if_unusable_or_obsolete``) before it is raised, so
    the next call opens a new one: a completion retried while its lease lasts
    (``idempotency.core.lease``) reaches a server that came back, instead of failing
    on the dead connection until the request ends (Django checks it only between
    requests), as the ``a*`` twins do.
    """

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(1, DEADLOCK_ATTEMPTS + 1):
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:
                connection = connections[self.using]
                if connection.in_atomic_block:
                    raise
                if not isinstance(exc, OperationalError) or not is_lock_error(exc):
                    # an outage arrives as StoreUnavailable (outage_raises_unavailable)
                    connection.close_if_unusable_or_obsolete()
                    raise
                if not is_deadlock(exc) or attempt == DEADLOCK_ATTEMPTS:
                    raise StoreUnavailable(
                        "The idempotency store is busy (a lock wait ran out), so this "
                        "request was not run; retry later.",
                        retry_after=int(idempotency_settings.RETRY_AFTER),
                    ) from exc
                time.sleep(random.uniform(0.005, 0.02) * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    return wrapper
