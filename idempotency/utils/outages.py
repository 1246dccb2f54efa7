"""Store outages and unreadable records: a backend that cannot be reached becomes
:class:`StoreUnavailable`, a value under a record's key that is no record
:class:`~idempotency.exceptions.StoreCorrupted`.

Stores, submit tokens and locks wrap their backend calls with
:func:`outage_raises_unavailable`, so a database, Redis or cache connection error
surfaces as one exception (503 over HTTP, a later retry for a task) and one
``store_unavailable`` signal, never as the backend's own error (a bare 500). Errors
that are not outages (a lock timeout, a deadlock, a unique violation, a bug) pass
through untouched. A store's own methods of ``(scope, key, ...)`` use
:func:`store_operation`, which also turns a value that is not a record into
:class:`~idempotency.exceptions.StoreCorrupted`.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from django.db import InterfaceError, OperationalError

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.exceptions import IdempotencyError, StoreCorrupted, StoreUnavailable
from idempotency.utils.hashing import log_ref

logger = logging.getLogger("idempotency")

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")

#: PostgreSQL SQLSTATEs of a server that is gone or refusing sessions: connection
#: exceptions (class 08), admin/crash shutdown, cannot connect now, too many connections.
_PG_OUTAGE_STATES = frozenset({"57P01", "57P02", "57P03", "53300"})
#: MySQL/MariaDB error numbers of a server that is gone or refusing sessions: too many
#: connections (1040), shutdown in progress (1053), network errors (1158-1161), the
#: connection killed (1927, MariaDB), disconnected for inactivity (4031, MySQL 8), and the
#: client's own: cannot connect (2002, 2003), server gone away (2006), lost connection
#: (2013, 2055).
_MYSQL_OUTAGE_ERRORS = frozenset(
    {1040, 1053, 1158, 1159, 1160, 1161, 1927, 4031, 2002, 2003, 2006, 2013, 2055}
)
#: Lock waits that ended without the lock: PostgreSQL's SQLSTATEs (lock_not_available,
#: deadlock, serialization failure) and MySQL's error numbers (lock wait timeout, deadlock).
_PG_LOCK_STATES = frozenset({"55P03", "40P01", "40001"})
_MYSQL_LOCK_ERRORS = frozenset({1205, 1213})
_DEADLOCKS = frozenset({"40P01", 1213})


def _mysql_error(cause: BaseException | None) -> int | None:
    """The error number of a MySQLdb (mysqlclient) error, else None."""
    if cause is None or not type(cause).__module__.startswith("MySQLdb"):
        return None
    code = cause.args[0] if cause.args else None
    return code if isinstance(code, int) else None


def _database_error_code(exc: BaseException) -> str | int | None:
    cause = exc.__cause__
    mysql = _mysql_error(cause)
    if mysql is not None:
        return mysql
    return getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)


def is_lock_error(exc: BaseException) -> bool:
    """Whether a database error is a lock wait that ended without the lock (a timeout or
    a deadlock), on PostgreSQL, MySQL/MariaDB or SQLite: busy, not down."""
    if not isinstance(exc, OperationalError):
        return False
    code = _database_error_code(exc)
    if code in _PG_LOCK_STATES or code in _MYSQL_LOCK_ERRORS:
        return True
    return "database is locked" in str(exc)


def is_deadlock(exc: BaseException) -> bool:
    """Whether a database error chose this transaction as a deadlock's victim (retryable:
    the server rolled it back)."""
    return isinstance(exc, OperationalError) and _database_error_code(exc) in _DEADLOCKS


def _redis_outage(exc: BaseException) -> bool:
    try:
        from redis import exceptions as redis_exceptions
    except ImportError:  # pragma: no cover - redis is an optional extra
        return False
    return isinstance(
        exc,
        redis_exceptions.ConnectionError  # BusyLoadingError (AOF loading) included
        | redis_exceptions.TimeoutError
        | redis_exceptions.ReadOnlyError  # a replica after a failover
        # Redis Cluster: a failover or resharding under way (CLUSTERDOWN, MASTERDOWN,
        # TRYAGAIN, a slot no node serves yet, the client's redirections exhausted)
        | redis_exceptions.ClusterError
        | redis_exceptions.TryAgainError
        | redis_exceptions.SlotNotCoveredError,
    )


def _database_outage(exc: BaseException) -> bool:
    if isinstance(exc, InterfaceError):  # the connection is closed
        return True
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    mysql = _mysql_error(cause)
    if mysql is not None:
        return mysql in _MYSQL_OUTAGE_ERRORS
    if cause is None or not hasattr(cause, "sqlstate") and not hasattr(cause, "pgcode"):
        return False  # SQLite ("database is locked" is a lock wait, not an outage)
    state = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if state is None:  # psycopg: no server answer at all (refused, reset, closed)
        return True
    return str(state).startswith("08") or state in _PG_OUTAGE_STATES


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` means the backend could not be reached (rather than refused the call)."""
    if isinstance(exc, StoreUnavailable):
        return False
    return _redis_outage(exc) or _database_outage(exc) or isinstance(exc, ConnectionError)


def unavailable(
    backend: str,
    operation: str,
    error: BaseException,
    *,
    sender: type[Any] | None = None,
    scope: str | None = None,
    key: str | None = None,
) -> StoreUnavailable:
    """The :class:`StoreUnavailable` to raise for ``error``, counted and logged (rate-limited)."""
    signals.store_unavailable.send(
        sender=sender,
        request=None,
        scope=scope,
        key=key,
        store=getattr(sender, "__name__", "-"),
        exception=error,
        backend=backend,
        operation=operation,
    )
    bursts.log(
        f"store:{backend}",
        "idempotency: the %s backend is unreachable (%s failed: %s)",
        backend,
        operation,
        error,
    )
    return StoreUnavailable(retry_after=int(idempotency_settings.RETRY_AFTER))


def outage_raises_unavailable(
    backend: str, *, keyed: bool = True
) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """Decorate a backend method so that an outage raises :class:`StoreUnavailable`.

    ``keyed``: the method's first two positional arguments are ``scope`` and ``key``
    (store methods), sent with the signal. A coroutine function (a store's ``a*``
    method) is wrapped by a coroutine function (:func:`wrap_errors`).
    """

    def decorate(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        def problem(self: S, args: tuple[Any, ...], exc: Exception) -> Exception | None:
            if not is_outage(exc):
                return None
            scope = str(args[0]) if keyed and len(args) > 1 else None
            key = str(args[1]) if keyed and len(args) > 1 else None
            return unavailable(
                backend, method.__name__, exc, sender=type(self), scope=scope, key=key
            )

        return wrap_errors(method, problem)

    return decorate


def wrap_errors(
    method: Callable[Concatenate[S, P], R],
    problem: Callable[[S, tuple[Any, ...], Exception], Exception | None],
) -> Callable[Concatenate[S, P], R]:
    """``method`` whose exceptions ``problem`` may replace: ``problem(self, args, exc)``
    returns the exception to raise instead (``from exc``), or None to let ``exc`` pass.
    A coroutine function gets a coroutine function that does the same around its
    ``await``: one rule for a store's sync methods and their ``a*`` twins."""
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def awrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> Any:
            try:
                return await method(self, *args, **kwargs)
            except Exception as exc:
                replacement = problem(self, args, exc)
                if replacement is None:
                    raise
                raise replacement from exc

        # R is the coroutine the method returns; a TypeGuard narrows ``method``, not R
        return cast("Callable[Concatenate[S, P], R]", awrapper)

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            replacement = problem(self, args, exc)
            if replacement is None:
                raise
            raise replacement from exc

    return wrapper


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
    if isinstance(exc, IdempotencyError) or not _unreadable(exc):
        return None
    return unreadable_record(type(store).__name__, scope, key, f"{type(exc).__name__}: {exc}")


def unreadable_record(where: str, scope: str, key: str, reason: str) -> Exception:
    """A :class:`~idempotency.exceptions.StoreCorrupted` for the record of ``(scope,
    key)``, logged as an error under its hashed name
    (:func:`idempotency.utils.hashing.log_ref`): logs never carry a raw key or scope."""
    ref = log_ref(scope, key)
    logger.error(
        "idempotency: the record %s in %s is unreadable (%s); nothing ran. Delete the "
        "value under its key, or give the store another key_prefix.",
        ref,
        where,
        reason,
    )
    return StoreCorrupted(
        f"The idempotency record {ref} is unreadable, so nothing was run.",
        scope=scope,
        key=key,
    )


def store_operation(
    backend: str,
) -> Callable[[Callable[Concatenate[S, str, str, P], R]], Callable[Concatenate[S, str, str, P], R]]:
    """Decorate a store method of ``(scope, key, ...)``, sync or ``async``: a value under
    the record's key that is not a record raises
    :class:`~idempotency.exceptions.StoreCorrupted` (logged with the key; the caller's
    work does not run), an outage of ``backend``
    :class:`~idempotency.exceptions.StoreUnavailable` as
    ``outage_raises_unavailable`` raises it, anything else
    passes through. One wrapper for both: every claim and completion goes through it."""

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


class BurstLog:
    """Log a recurring failure once per burst: the first time, then at most once a minute.

    The messages suppressed in between are counted in the next one, so an outage of a
    thousand requests writes a few lines, not a thousand tracebacks.
    """

    def __init__(self, interval: float = 60.0) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def log(self, name: str, message: str, *args: Any) -> bool:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(name)
            if last is not None and now - last < self.interval:
                self._suppressed[name] = self._suppressed.get(name, 0) + 1
                return False
            self._last[name] = now
            suppressed = self._suppressed.pop(name, 0)
        if suppressed:
            message += " (%d more since the last report)"
            args = (*args, suppressed)
        logger.warning(message, *args)
        return True

    def reset(self) -> None:
        with self._lock:
            self._last.clear()
            self._suppressed.clear()


bursts = BurstLog()
