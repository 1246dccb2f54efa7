"""Settings of django-idempotency: one ``IDEMPOTENCY`` dict, defaults documented here.

Read them through :data:`idempotency_settings`; it re-reads Django's settings
whenever they change (``override_settings`` included), and resolves dotted
paths once until then. Defaults are never written into ``django.conf.settings``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

#: Every setting, its default and what it means. The README's configuration
#: table is checked against this mapping by the test suite.
DEFAULTS: dict[str, Any] = {
    # Name of the request header that carries the key.
    "HEADER": "Idempotency-Key",
    # Dotted path of the store class used when a view names none.
    "STORE": "idempotency.stores.DatabaseStore",
    # "atomic", "lease" or "auto" (atomic where the store supports it, else lease).
    "MODE": "auto",
    # Atomic mode: "first" claims the key inside the view's transaction before the view
    # runs (a concurrent duplicate waits and never runs the view); "optimistic" inserts
    # the record after the view, for views whose every effect is in that transaction.
    "ATOMIC_CLAIM": "first",
    # Atomic mode: database aliases wrapped in the view's transaction besides
    # DATABASE_ALIAS (list every alias a protected view writes to).
    "ATOMIC_DATABASES": [],
    # Seconds a completed record is kept and replayed (24 h).
    "TTL": 86400,
    # Seconds a lease-mode claim is owned before another request may take it over.
    "LEASE": 60,
    # Seconds a request waits for a concurrent first request before answering 409.
    "WAIT": 0.0,
    # Atomic mode on PostgreSQL: seconds a request may wait on a lock (a concurrent
    # duplicate's record, or the view's own rows) before answering 409; None: no bound
    # beyond the first request's own transaction (and no extra statement per request).
    "LOCK_TIMEOUT": None,
    # Value of Retry-After on a 409 for a request still in progress.
    "RETRY_AFTER": 1,
    # Whether views reject unsafe requests that carry no key (400).
    "REQUIRED": False,
    # Dotted path of scope(request) -> str | None; None means "anonymous".
    "SCOPE": "idempotency.scopes.user_scope",
    # What happens to an anonymous request with a key: "reject" (403) or "ignore" (run it
    # without idempotency). Anonymous callers never share stored responses.
    "ANONYMOUS": "reject",
    # Dotted path of fingerprint(request, route, headers) -> str (SHA-256 hex).
    "FINGERPRINT": "idempotency.http.fingerprints.request_fingerprint",
    # Request headers (names) that also go into the fingerprint.
    "FINGERPRINT_HEADERS": [],
    # Largest response body stored for replay (bytes); a larger one commits, and its
    # key answers retries with 410 idempotency-response-not-stored. None: no limit.
    "MAX_RESPONSE_BYTES": 1048576,
    # Response headers kept and replayed (Content-Type is always kept).
    "REPLAY_HEADERS": [
        "Content-Language",
        "Content-Disposition",
        "Location",
        "ETag",
        "Last-Modified",
        "Link",
        "Cache-Control",
    ],
    # Store 5xx and transient 4xx responses too (at-most-once) instead of releasing.
    "STORE_ERRORS": False,
    # What a view does when its store cannot be reached: "reject" (503
    # idempotency-store-unavailable with Retry-After; the view does not run) or "run" (run
    # it without idempotency: retries may then repeat it). Per view: on_store_unavailable.
    "STORE_UNAVAILABLE": "reject",
    # Cache alias whose backend stores records for CacheStore.
    "CACHE_ALIAS": "default",
    # Cache alias (django-redis) whose connection RedisStore, tokens and locks use.
    "REDIS_ALIAS": "default",
    # RedisStore: replicas that must acknowledge each claim, completion and recovery
    # point (WAIT numreplicas timeout) before it counts; 0 waits for none.
    "REDIS_WAIT_REPLICAS": 0,
    # RedisStore: seconds WAIT may block for those replicas; a claim not replicated in
    # time is released and answered with 503.
    "REDIS_WAIT_TIMEOUT": 0.5,
    # Cache alias of a read-through cache of completed responses in front of
    # DatabaseStore (replays then cost no SQL), or None.
    "RESPONSE_CACHE": None,
    # Prefix of every key written to Redis or a cache.
    "KEY_PREFIX": "idem",
    # Database alias DatabaseStore writes to.
    "DATABASE_ALIAS": "default",
    # Start of the "type" URI of problem+json errors; the stable code is appended.
    "PROBLEM_TYPE_BASE": "https://django-idempotency.dev/problems/",
    # Seconds a one-time submit token lives.
    "SUBMIT_TOKEN_TTL": 600,
    # Request header that carries a one-time submit token.
    "SUBMIT_TOKEN_HEADER": "X-Submit-Token",
    # Backend of submit tokens: "database" or "redis".
    "SUBMIT_TOKEN_BACKEND": "database",
    # Backend of idempotency.locks.lock(): "redis" or "postgres".
    "LOCK_BACKEND": "redis",
    # Rows deleted per batch by purge_idempotency_records.
    "PURGE_BATCH_SIZE": 5000,
    # Count outcomes and claim latency in Prometheus metrics (needs prometheus-client).
    "METRICS": False,
    # Log one record per non-trivial outcome on the "idempotency.outcomes" logger.
    "LOG_OUTCOMES": True,
}

#: The values of ``MODE``, and of ``mode=`` on views, functions and tasks.
MODES = ("auto", "atomic", "lease")

#: Longest idempotency key a store accepts (``IdempotencyRecord.key``), whether it comes
#: from a request's header or from a function's or task's key.
MAX_KEY_LENGTH = 255

#: Settings that hold dotted paths, imported on first use.
IMPORT_STRINGS = frozenset({"STORE", "SCOPE", "FINGERPRINT"})


class IdempotencySettings:
    """Attribute access to ``settings.IDEMPOTENCY`` merged over :data:`DEFAULTS`."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    @property
    def user_settings(self) -> dict[str, Any]:
        value = getattr(settings, "IDEMPOTENCY", None) or {}
        if not isinstance(value, dict):
            return {}
        return value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in DEFAULTS:
            raise AttributeError(f"Invalid idempotency setting: {name!r}")
        try:
            return self._cache[name]
        except KeyError:
            pass
        value = self.user_settings.get(name, DEFAULTS[name])
        self._cache[name] = value
        return value

    def imported(self, name: str) -> Callable[..., Any]:
        """The object a dotted-path setting names, imported once."""
        key = f"__imported__{name}"
        try:
            return self._cache[key]  # type: ignore[no-any-return]
        except KeyError:
            pass
        value = getattr(self, name)
        obj = import_string(value) if isinstance(value, str) else value
        self._cache[key] = obj
        return obj  # type: ignore[no-any-return]

    def reload(self) -> None:
        self._cache.clear()


idempotency_settings = IdempotencySettings()

_reload_hooks: list[Callable[[], None]] = []


def on_reload(func: Callable[[], None]) -> Callable[[], None]:
    """Register ``func`` to run whenever ``IDEMPOTENCY`` or ``CACHES`` change."""
    _reload_hooks.append(func)
    return func


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in {"IDEMPOTENCY", "CACHES", "DATABASES"}:
        idempotency_settings.reload()
        for hook in _reload_hooks:
            hook()


setting_changed.connect(_settings_changed)
