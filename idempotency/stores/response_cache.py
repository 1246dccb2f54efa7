"""The read-through cache of completed responses in front of ``DatabaseStore``.

With a :class:`~idempotency.stores.database.DatabaseStore`'s ``response_cache`` option set to a
cache alias (Redis recommended), completed responses are read from that cache first, and
written to it by the first replay that reads them from the database: every later replay
costs no SQL, and a first request pays no cache write. The cache is never the source of truth:
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

from django.core.cache import caches

from idempotency import signals
from idempotency.codecs import UndecodableBody, unseal
from idempotency.exceptions import RecordForged
from idempotency.stores import authentication
from idempotency.stores.raw_cache import RawCache
from idempotency.stores.records import ClaimStatus, KeyState, StoredResponse, record_digest
from idempotency.utils.outages import bursts


class ResponseCache:
    """The response cache of one :class:`~idempotency.stores.database.DatabaseStore`: the cache
    alias ``alias``, under keys that name the store's ``database`` (and ``key_prefix``).
    ``owner`` is the store's class: what its logs name and its signals are sent by."""

    __slots__ = ("alias", "database", "key_prefix", "owner")

    def __init__(self, alias: str, *, database: str, key_prefix: str, owner: type) -> None:
        self.alias = alias
        self.database = database
        self.key_prefix = key_prefix
        self.owner = owner

    def raw(self) -> RawCache:
        """The cache, read and written as bytes that are never unpickled."""
        return RawCache(caches[self.alias], self.alias)

    def key(self, scope: str, key: str) -> str:
        """The cache key of the record ``(scope, key)``."""
        # the database alias too: two stores on two databases may share one cache
        digest = record_digest(f"{self.database}\x00{scope}", key)
        return f"{self.key_prefix}:resp:{digest}"

    def forget(self, scope: str, key: str) -> None:
        """Drop the cached response of ``(scope, key)``, if any."""
        try:
            self.raw().delete(self.key(scope, key))
        except Exception as exc:  # noqa: BLE001 - the cache only accelerates replays
            _cache_failed(self.owner, "delete", exc)

    def get(self, scope: str, key: str, fingerprint: str) -> KeyState | None:
        """The completed record as the cache holds it, or None (absent, or the cache
        failed: the database answers then; a cache is never the source of truth)."""
        cache = self.raw()
        try:
            cached = cache.get(self.key(scope, key))
            if cached is None:
                return None
            stored, fence, tag, response = _loads(cached)
        except Exception as exc:  # noqa: BLE001 - any cache error: fall back to the database
            # a value that is not ours (a foreign or forged one) too: never unpickled
            _cache_failed(self.owner, "get", exc)
            return None
        try:  # the database record's own tag: a cached copy is authenticated as it is
            expires = authentication.verify(
                f"{self.owner.__name__} response cache", scope, key, tag=tag,
                fingerprint=stored, fence=fence, stored=response,
            )  # fmt: skip
        except RecordForged:
            return None  # logged and counted; the database, the source of truth, answers
        if expires <= time.time():
            return None
        if stored != fingerprint:
            return KeyState(ClaimStatus.MISMATCH, fingerprint=stored)
        try:  # the cache keeps the body as the database does (BODY_CODEC)
            body = unseal(response.body)
        except UndecodableBody:
            return None  # not readable here: the database answers
        return KeyState(
            ClaimStatus.COMPLETED, response=response._replace(body=body), expires_at=expires
        )

    def put(
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
        """Keep the completed record ``response`` (its body as the database keeps it, and
        its ``tag``) for ``ttl`` seconds; a cache that fails loses nothing."""
        cache = self.raw()
        if int(ttl) <= 0:
            return
        try:
            value = _dumps(fingerprint, response, fence, tag)
            cache.set(self.key(scope, key), value, int(ttl))
        except Exception as exc:  # noqa: BLE001 - the cache only accelerates replays
            # after the commit: the record is in the database, so nothing is lost
            _cache_failed(self.owner, "set", exc)


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


def _cache_failed(owner: type, operation: str, error: BaseException) -> None:
    """Count a response-cache failure and log it once per burst."""
    signals.response_cache_failed.send(
        sender=owner,
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
