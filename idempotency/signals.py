"""One Django signal per outcome of a keyed request, call or task, for metrics, logs and audit
(each signal, when it is sent and its arguments: docs/reference/signals.md)."""

from __future__ import annotations

from collections.abc import Callable

from django.dispatch import Signal

stored = Signal()
replayed = Signal()
conflict = Signal()
mismatch = Signal()
released = Signal()
stale_owner = Signal()
invalid_key = Signal()
token_used = Signal()
lock_not_acquired = Signal()
store_unavailable = Signal()
purged = Signal()
response_cache_failed = Signal()
record_forged = Signal()

#: Outcome name -> signal, for receivers that handle every outcome alike.
OUTCOMES: dict[str, Signal] = {
    "stored": stored,
    "replayed": replayed,
    "conflict": conflict,
    "mismatch": mismatch,
    "released": released,
    "stale_owner": stale_owner,
    "invalid_key": invalid_key,
    "token_used": token_used,
    "lock_not_acquired": lock_not_acquired,
    "store_unavailable": store_unavailable,
    "record_forged": record_forged,
}

#: Signal -> (the dispatch_uid of the library's own log receiver on it, whether that
#: receiver would log now): set by :func:`idempotency.observability.connect`.
_LOG_RECEIVERS: dict[Signal, tuple[str, Callable[[], bool]]] = {}


def log_receiver(signal: Signal, dispatch_uid: str, logs_now: Callable[[], bool]) -> None:
    """Tell :func:`heard` that the receiver connected to ``signal`` with ``dispatch_uid``
    is the library's log receiver, which does nothing while ``logs_now()`` is false."""
    _LOG_RECEIVERS[signal] = (dispatch_uid, logs_now)


def heard(signal: Signal) -> bool:
    """Whether sending ``signal`` now reaches a receiver that acts on it: False when it has
    no receivers, or when its only one is the library's log receiver and that outcome's
    records are off (``LOG_OUTCOMES``, or the logger's level). The hot path asks before it
    builds a signal's arguments: a replay then dispatches nothing when nothing listens."""
    receivers = signal.receivers
    if not receivers:
        return False
    if len(receivers) > 1 or signal not in _LOG_RECEIVERS:
        return True
    dispatch_uid, logs_now = _LOG_RECEIVERS[signal]
    try:  # an entry is (lookup_key, receiver[, is_async]); lookup_key (dispatch_uid, sender id)
        only = receivers[0][0][0]
    except (IndexError, TypeError):  # a shape this code does not know: send, to be safe
        return True
    return only != dispatch_uid or logs_now()
