"""Signals for metrics, logs and audit.

The outcome of a request (or idempotent call) that takes part, one signal each.
HTTP requests send them with ``request``, ``scope``, ``key``, ``route`` (the URL
pattern, e.g. ``api/orders/<int:pk>/pay/``, never the path) and ``claim_seconds``
(how long the store took to decide who owns the key, or ``None``):

* ``first``: the caller owned the key, ran the view and its response was stored.
* ``replayed``: a stored response was replayed (``request`` or ``None``).
* ``conflict``: a duplicate arrived while the first was in progress (409).
* ``mismatch``: a key was reused with a different request (422).
* ``released``: a claim was released without storing (5xx, exception, transient 4xx).
* ``stale_owner``: a completion or release came from an owner whose lease was taken over.
* ``invalid_key``: the key header was malformed, or missing where required (400);
  sent with ``request``, ``code`` and ``scope``/``key`` ``None`` (a bad key is never sent).

Beyond the request flow:

* ``token_used``: a one-time submit token was presented a second time (409);
  sent with ``scope`` and ``purpose``.
* ``lock_not_acquired``: :func:`idempotency.lock` gave up waiting; sent with ``name``.
* ``store_unavailable``: a store could not be reached; sent with ``store`` (the
  store's class name) and ``exception``.
* ``purged``: a purge of expired records finished; sent with ``deleted`` and
  ``using`` (the database alias), so metrics can sample the table.
"""

from __future__ import annotations

from django.dispatch import Signal

first = Signal()
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

#: Outcome name -> signal, for receivers that handle every outcome alike.
OUTCOMES: dict[str, Signal] = {
    "first": first,
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
