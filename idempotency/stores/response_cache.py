"""The read-through cache of completed responses in front of ``DatabaseStore``.

With ``RESPONSE_CACHE`` set to a cache alias (Redis recommended), or a store's own
``response_cache=``, completed responses are read from that cache first, and written to
it by the first replay that reads them from the database: every later replay costs no
SQL, and a first request pays no cache write. The cache is never the source of truth:
any cache error falls back to the database.
"""

from __future__ import annotations

from django.core.cache import BaseCache, caches

from idempotency import signals
from idempotency.codecs import UndecodableBody, unseal
from idempotency.conf import idempotency_settings
from idempotency.outages import bursts
from idempotency.stores import record_digest
from idempotency.stores.base import Claim, ClaimStatus, StoredResponse


class ResponseCache:
    """The response-cache half of :class:`~idempotency.stores.database.DatabaseStore`."""

    _response_cache: str | None

    @property
    def response_cache(self) -> BaseCache | None:
        alias = self._response_cache or idempotency_settings.RESPONSE_CACHE
        return caches[alias] if alias else None

    def _cache_key(self, scope: str, key: str) -> str:
        return f"{idempotency_settings.KEY_PREFIX}:resp:{record_digest(scope, key)}"

    def forget_cached(self, scope: str, key: str) -> None:
        cache = self.response_cache
        if cache is not None:
            try:
                cache.delete(self._cache_key(scope, key))
            except Exception as exc:  # noqa: BLE001 - the cache only accelerates replays
                _cache_failed(self, "delete", exc)

    def _cached_response(self, scope: str, key: str, fingerprint: str) -> Claim | None:
        """The completed record as the response cache holds it, or None (absent, or the
        cache failed: the database answers then; a cache is never the source of truth)."""
        cache = self.response_cache
        if cache is None:
            return None
        try:
            cached = cache.get(self._cache_key(scope, key))
        except Exception as exc:  # noqa: BLE001 - any cache error: fall back to the database
            _cache_failed(self, "get", exc)
            return None
        if not isinstance(cached, dict):
            return None
        if cached.get("fingerprint") != fingerprint:
            return Claim(ClaimStatus.MISMATCH, fingerprint=str(cached.get("fingerprint", "")))
        try:  # the cache keeps the body as the database does (BODY_CODEC)
            body = unseal(cached["body"])
        except UndecodableBody:
            return None  # not readable here: the database answers
        return Claim(
            ClaimStatus.COMPLETED,
            response=StoredResponse(cached["status"], cached["headers"], body),
        )

    def _cache_response(
        self, scope: str, key: str, fingerprint: str, response: StoredResponse, ttl: float
    ) -> None:
        cache = self.response_cache
        if cache is None or int(ttl) <= 0:
            return
        try:
            cache.set(
                self._cache_key(scope, key),
                {
                    "fingerprint": fingerprint,
                    "status": response.status,
                    "headers": response.headers,
                    "body": response.body,
                },
                timeout=int(ttl),
            )
        except Exception as exc:  # noqa: BLE001 - the cache only accelerates replays
            # after the commit: the record is in the database, so nothing is lost
            _cache_failed(self, "set", exc)


def _cache_failed(store: ResponseCache, operation: str, error: BaseException) -> None:
    """Count a response-cache failure and log it once per burst."""
    signals.response_cache_failed.send(
        sender=type(store),
        request=None,
        scope=None,
        key=None,
        operation=operation,
        exception=error,
    )
    bursts.log(
        "response-cache",
        "idempotency: the response cache failed (%s: %s); the database answers instead",
        operation,
        error,
    )
