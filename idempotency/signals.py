"""One Django signal per outcome of a keyed request, call or task, for metrics, logs and audit
(each signal, when it is sent and its arguments: docs/reference/signals.md)."""

from __future__ import annotations

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
}
