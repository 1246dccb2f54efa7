"""The read-through cache of completed responses in front of ``DatabaseStore``.

With the store's ``response_cache`` option set to a cache alias (Redis recommended),
completed responses are read from that cache first, and written to
it by the first replay that reads them from the database: every later replay costs no
SQL, and a first request pays no cache write. The cache is never the source of truth:
any cache error falls back to the database.

A cached response is bytes the library encodes itself (a JSON line of status,
fingerprint, headers, fencing token and the database record's tag, then the body),
authenticated as the database record is (a copy that fails is ignored, logged and
counted: the database answers), read without the cache's serializer
(:mod:`.raw_cache`): a pickle written under its key is never unpickled. Its key names
the database alias, so two ``DatabaseStore(database=...)`` sharing one cache never
answer each other's records.
"""

from __future__ import annotations

import json
import time

from django.core.cache import BaseCache, caches

from idempotency import signals
from idempotency.codecs import UndecodableBody, unseal
from idempotency.core.outages import bursts
from idempotency.exceptions import RecordForged
from idempotency.stores import authentication, record_digest
from idempotency.stores.atomic import AtomicStore
from idempotency.stores.base import Claim, ClaimStatus, StoredResponse
from idempotency.stores.raw_cache import RawCache


class ResponseCache(AtomicStore):
    """The response-cache half of :class:`~idempotency.stores.database.DatabaseStore`: an
    :class:`~idempotency.stores.atomic.AtomicStore`, whose database alias (``using``)
    its keys name."""

    _response_cache: str | None
    key_prefix: str

    @property
    def response_cache(self) -> BaseCache | None:
        alias = self._response_cache
        return caches[alias] if alias else None

    def _raw_response_cache(self) -> RawCache | None:
        alias = self._response_cache
        return RawCache(caches[alias], alias) if alias else None

    def _cache_key(self, scope: str, key: str) -> str:
        # the database alias too: two stores on two databases may share one cache
        digest = record_digest(f"{self.using}\x00{scope}", key)
        return f"{self.key_prefix}:resp:{digest}"

    def forget_cached(self, scope: str, key: str) -> None:
        cache = self._raw_response_cache()
        if cache is not None:
            try:
                cache.delete(self._cache_key(scope, key))
            except Exception as exc:  # noqa: BLE001 - the cache only accelerates replays
                _cache_failed(self, "delete", exc)

    def _cached_response(self, scope: str, key: str, fingerprint: str) -> Claim | None:
        """The completed record as the response cache holds it, or None (absent, or the
        cache failed: the database answers then; a cache is never the source of truth)."""
        cache = self._raw_response_cache()
        if cache is None:
            return None
        try:
            cached = cache.get(self._cache_key(scope, key))
            if cached is None:
                return None
            stored, fence, tag, response = _loads(cached)
        except Exception as exc:  # noqa: BLE001 - any cache error: fall back to the database
            # a value that is not ours (a foreign or forged one) too: never unpickled
            _cache_failed(self, "get", exc)
            return None
        try:  # the database record's own tag: a cached copy is authenticated as it is
            expires = authentication.verify(
                f"{type(self).__name__} response cache", scope, key, tag=tag,
                fingerprint=stored, fence=fence, stored=response,
            )  # fmt: skip
        except RecordForged:
            return None  # logged and counted; the database, the source of truth, answers
        if expires <= time.time():
            return None
        if stored != fingerprint:
            return Claim(ClaimStatus.MISMATCH, fingerprint=stored)
        try:  # the cache keeps the body as the database does (BODY_CODEC)
            body = unseal(response.body)
        except UndecodableBody:
            return None  # not readable here: the database answers
        return Claim(
            ClaimStatus.COMPLETED, response=response._replace(body=body), expires_at=expires
        )

    def _cache_response(
        self,
        scope: str,
        key: str,
        fingerprint: str,
        response: StoredResponse,
        ttl: float,
        *,
        fence: int,
        tag: str,
    ) -> None:
        cache = self._raw_response_cache()
        if cache is None or int(ttl) <= 0:
            return
        try:
            value = _dumps(fingerprint, response, fence, tag)
            cache.set(self._cache_key(scope, key), value, int(ttl))
        except Exception as exc:  # noqa: BLE001 - the cache only accelerates replays
            # after the commit: the record is in the database, so nothing is lost
            _cache_failed(self, "set", exc)


def _dumps(fingerprint: str, response: StoredResponse, fence: int, tag: str) -> bytes:
    """A cached response: a JSON line ``[status, fingerprint, headers, fence, tag]`` (the
    database record's, :mod:`~idempotency.stores.authentication`), then the body as the
    database keeps it."""
    head = json.dumps(
        [response.status, fingerprint, response.headers, fence, tag], separators=(",", ":")
    )
    return head.encode() + b"\n" + response.body


def _loads(value: object) -> tuple[str, int, str, StoredResponse]:
    """What :func:`_dumps` wrote (fingerprint, fence, tag, response); ``ValueError`` for
    anything else."""
    if not isinstance(value, bytes | bytearray):
        raise ValueError(f"a {type(value).__name__} where a cached response should be")
    head, newline, body = bytes(value).partition(b"\n")
    status, fingerprint, headers, fence, tag = json.loads(head)
    if not newline or not isinstance(status, int) or not isinstance(fingerprint, str):
        raise ValueError("not a cached response")
    return fingerprint, fence, str(tag), StoredResponse.from_parts(status, headers, body)


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
