"""Signals for metrics and audit. Every one is sent with ``scope`` and ``key``.

* ``replayed``: a stored response was replayed (``request`` or ``None``).
* ``conflict``: a duplicate arrived while the first was in progress (409).
* ``mismatch``: a key was reused with a different request (422).
* ``released``: a claim was released without storing (5xx, exception, transient 4xx).
* ``stale_owner``: a completion or release came from an owner whose lease was taken over.
* ``store_unavailable``: a store, token or lock backend could not be reached (the request
  answered 503, a task was retried later). Sent with ``backend`` (``"database"``,
  ``"redis"`` or ``"cache"``), ``operation`` and ``error``; ``scope`` and ``key`` are
  None where the operation has none (tokens, locks).
* ``response_cache_failed``: the response cache in front of ``DatabaseStore`` raised on
  ``operation`` (``"get"``, ``"set"`` or ``"delete"``); the database answered instead.
"""

from __future__ import annotations

from django.dispatch import Signal

replayed = Signal()
conflict = Signal()
mismatch = Signal()
released = Signal()
stale_owner = Signal()
store_unavailable = Signal()
response_cache_failed = Signal()
