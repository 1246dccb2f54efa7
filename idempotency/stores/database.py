"""DatabaseStore: records in the ``IdempotencyRecord`` table (the default store).

The unique constraint on ``(scope, key)`` decides every race: a claim is an
``INSERT … ON CONFLICT`` statement (PostgreSQL and SQLite) or an ``INSERT … ON
DUPLICATE KEY UPDATE`` (MySQL and MariaDB), never a read followed by an unguarded
write. A free key costs one short insert (``DO NOTHING``);
only an expired record or an abandoned lease is replaced, by an upsert. It is the
only store that supports *atomic mode*, where the record commits in the same
transaction as the view's writes. The SQL lives in
:mod:`~idempotency.stores.statements`, the response cache in
:mod:`~idempotency.stores.response_cache`. How it reaches its table is in
:mod:`~idempotency.stores.database_table`, a running owner's updates (release,
keep-alive, recovery points) in :mod:`~idempotency.stores.database_leases`, the record
quota in :mod:`~idempotency.stores.record_quota`, lock waits that fail in
:mod:`~idempotency.stores.deadlocks`.

With the ``response_cache`` option set to a cache alias (Redis recommended), completed
responses are read from that cache first, and written to it by the first replay
that reads them from the database: every later replay costs no SQL, and a first
request pays no cache write.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.core.cache import BaseCache
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from idempotency.codecs import UndecodableBody, seal, unseal
from idempotency.core.outages import outage_raises_unavailable
from idempotency.stores import authentication
from idempotency.stores import statements as sql
from idempotency.stores.database_leases import DatabaseLeases
from idempotency.stores.database_table import database_aliases
from idempotency.stores.deadlocks import DEADLOCK_ATTEMPTS, busy
from idempotency.stores.errors import corrupted
from idempotency.stores.purge import purge_now_and_then
from idempotency.stores.record_quota import count_new_record
from idempotency.stores.records import ClaimStatus, KeyState, StoredResponse, new_fence
from idempotency.stores.response_cache import ResponseCache

__all__ = ["DEADLOCK_ATTEMPTS", "DatabaseStore", "busy", "database_store"]


class DatabaseStore(ResponseCache, DatabaseLeases):
    """Records in the ``IdempotencyRecord`` table of its ``database`` (the default store).

    The claim is an ``INSERT ... ON CONFLICT`` (PostgreSQL and SQLite) or ``INSERT ... ON
    DUPLICATE KEY UPDATE`` (MySQL and MariaDB) on the unique ``(scope, key)`` index;
    completion and release check the fencing token. It is the only store with atomic
    mode: the claim, the view's writes and the stored response commit in one
    transaction. On PostgreSQL, MySQL and MariaDB leases and expiry are judged by the
    server's clock. Configure it as an alias of ``IDEMPOTENCY["STORES"]``: ``{"BACKEND":
    "idempotency.stores.DatabaseStore", "OPTIONS": {"database": "payments",
    "response_cache": "redis"}}`` (its ``options`` list what it takes).
    """

    #: A claim that meets a live record needs a second statement to read it, so a
    #: repeat is cheapest as one lookup.
    lookup_before_claim: ClassVar[bool] = True

    # -- the contract --------------------------------------------------------------------

    @busy
    @outage_raises_unavailable("database")
    def lookup(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        cache = self.response_cache
        cached = self._cached_response(scope, key, fingerprint) if cache is not None else None
        if cached is not None:
            return cached
        connection = connections[self.using]
        # one SELECT through the unique (scope, key) index; plain SQL, because building it
        # with the ORM cost more than running it
        with connection.cursor() as cursor:
            cursor.execute(self._sql(connection).lookup, {"scope": scope, "key": key})
            found = cursor.fetchone()
        if found is None:
            return None
        if len(found) > 11:  # PostgreSQL, MySQL: epoch seconds, judged by the server's clock
            now, lease, expires = found[11], found[2], found[10]
        else:  # judged by ours, the clock the statements' times came from (sql.Clock)
            now = timezone.now().timestamp()
            lease, expires = sql.as_epoch(connection, found[2]), sql.as_epoch(connection, found[10])
        return self._state(scope, key, fingerprint, found, lease, expires, now, cache)

    def _state(
        self,
        scope: str,
        key: str,
        fingerprint: str,
        row: Any,
        lease: float | None,
        expires: float | None,
        now: float,
        cache: BaseCache | None,
    ) -> KeyState | None:
        """The state of a record read as :data:`~statements.LOOKUP_FIELDS`, its lease and
        expiry in seconds since the epoch, judged at ``now`` (None when expired: absent,
        even before it is purged)."""
        fp, state, _lease, status, headers, body, point, data, fence, tag = row[:10]
        if expires is None or expires <= now:
            return None
        if state == "completed":
            kept = StoredResponse.from_parts(status, headers, body)
            # authenticated before anything is answered from it (a mismatch included)
            expires = min(expires, authentication.verify(
                type(self).__name__, scope, key, tag=tag, fingerprint=fp, fence=fence,
                stored=kept,
            ))  # fmt: skip
            if expires <= now:
                return None
            if fp != fingerprint:
                return KeyState(ClaimStatus.MISMATCH, fingerprint=fp)
            try:
                response = kept._replace(body=unseal(kept.body))
            except UndecodableBody as exc:
                raise corrupted(self, scope, key, exc) or exc from exc
            if cache is not None:  # the cache keeps the body (and its tag) as the database does
                self._cache_response(scope, key, fp, kept, expires - now, fence=fence, tag=tag)
            return KeyState(ClaimStatus.COMPLETED, response=response, expires_at=expires)
        if fp != fingerprint:
            return KeyState(ClaimStatus.MISMATCH, fingerprint=fp)
        data = sql.as_json(data)
        if lease is not None and lease <= now:
            # an abandoned lease: the next claim takes it over
            return KeyState(ClaimStatus.IN_PROGRESS, recovery_point=point, recovery_data=data)
        retry = lease - now if lease is not None else 1.0
        return KeyState(
            ClaimStatus.IN_PROGRESS,
            recovery_point=point,
            recovery_data=data,
            retry_after=retry,
        )

    def peek(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        """With a response cache, the cache alone: a replay costs no SQL, and a first
        request (a miss) costs no SQL lookup before its claim either, which answers for
        a record the cache does not hold (and the claim's own read fills the cache)."""
        if self.response_cache is None:
            return self.lookup(scope, key, fingerprint=fingerprint)
        return self._cached_response(scope, key, fingerprint)

    @busy
    @outage_raises_unavailable("database")
    def claim(
        self,
        scope: str,
        key: str,
        *,
        fingerprint: str,
        lease: float,
        ttl: float,
        method: str = "",
        route: str = "",
    ) -> KeyState:
        """Own the key, or the state of the live record that holds it.

        Inside a transaction (atomic mode) the claim is part of it: invisible to others
        until the commit, and a concurrent claim of the same key waits on the unique index
        until this transaction ends, then sees the committed record (or claims the key,
        when this transaction rolled back).
        """
        connection = connections[self.using]
        statements = self._sql(connection)
        if statements.owner is not None:
            return self._claim_mysql(
                connection, statements, scope, key, fingerprint, method, route, lease, ttl
            )
        statement = statements.fresh_claim
        for _attempt in range(5):
            fence = new_fence()
            params = self._values(
                connection, scope, key, fingerprint, fence, method, route, lease=lease, ttl=ttl
            )
            with connection.cursor() as cursor:
                cursor.execute(statement, params)
                returned = cursor.fetchone()
            if returned is not None:
                if statement is statements.fresh_claim:
                    return KeyState(ClaimStatus.CLAIMED, fence=fence)
                point, data, taken_over = returned
                return KeyState(
                    ClaimStatus.CLAIMED,
                    fence=fence,
                    recovery_point=point or "",
                    recovery_data=sql.as_json(data),
                    taken_over=bool(taken_over),
                )
            existing = self.lookup(scope, key, fingerprint=fingerprint)
            if existing is not None and not _replaceable(existing):
                return existing
            # expired (not yet purged), abandoned, or released between our insert and our
            # read: the upsert replaces an expired record and takes an abandoned lease over
            statement = statements.claim
        return KeyState(ClaimStatus.IN_PROGRESS, retry_after=1.0)

    def _claim_mysql(
        self,
        connection: BaseDatabaseWrapper,
        statements: sql.Statements,
        scope: str,
        key: str,
        fingerprint: str,
        method: str,
        route: str,
        lease: float,
        ttl: float,
    ) -> KeyState:
        """MySQL and MariaDB: the upsert, then the row it left (see
        :func:`~idempotency.stores.statements_mysql.upsert`): ours when it holds our fence,
        else the live record that keeps the key, answered like a lookup."""
        for _attempt in range(5):
            fence = new_fence()
            params = self._values(
                connection, scope, key, fingerprint, fence, method, route, lease=lease, ttl=ttl
            )
            row = self._upsert_mysql(connection, statements, statements.claim, params)
            if row is None:
                continue  # released between the upsert and the read: claim again
            if row[0] == fence:
                return KeyState(
                    ClaimStatus.CLAIMED,
                    fence=fence,
                    recovery_point=row[7] or "",
                    recovery_data=sql.as_json(row[8]),
                    taken_over=bool(row[13]),
                )
            found = row[1:13]
            existing = self._state(
                scope, key, fingerprint, found, found[2], found[10], found[11], self.response_cache
            )
            if existing is not None and not _replaceable(existing):
                return existing
            # its lease or TTL ran out between the upsert and the read: claim again
        return KeyState(ClaimStatus.IN_PROGRESS, retry_after=1.0)

    @busy
    @outage_raises_unavailable("database")
    def insert_completed(
        self,
        scope: str,
        key: str,
        *,
        fingerprint: str,
        response: StoredResponse,
        ttl: float,
        method: str = "",
        route: str = "",
    ) -> bool:
        """Atomic mode, optimistic claim: insert the completed record inside the caller's
        transaction, after the view ran.

        False when a live record already holds the key (a concurrent duplicate
        committed first); the caller then rolls its transaction back and replays.
        On PostgreSQL the insert waits for a concurrent uncommitted one to finish.
        """
        connection = connections[self.using]
        statements = self._sql(connection)
        # MySQL: a fence of its own tells whether the upsert wrote the row
        fence = new_fence() if statements.owner is not None else 0
        params = self._values(
            connection, scope, key, fingerprint, fence, method, route, lease=None, ttl=ttl,
            response=response,
        )  # fmt: skip
        if statements.owner is not None:
            row = self._upsert_mysql(
                connection, statements, statements.insert, {**params, "lease": 0}
            )
            inserted = row is not None and row[0] == fence
        else:
            with connection.cursor() as cursor:
                cursor.execute(statements.fresh_insert, params)
                inserted = cursor.fetchone() is not None
                if not inserted:
                    # the key is taken: the upsert replaces the record only if it expired
                    cursor.execute(statements.insert, params)
                    inserted = cursor.fetchone() is not None
        if inserted:
            purge_now_and_then(self.using)
        return inserted

    @busy
    @outage_raises_unavailable("database")
    def complete(
        self,
        scope: str,
        key: str,
        *,
        fence: int,
        response: StoredResponse,
        ttl: float,
        fingerprint: str = "",
    ) -> bool:
        connection = connections[self.using]
        stored = response._replace(body=seal(response.body))
        if not fingerprint:  # a caller that did not say: the claim's, which the tag binds
            fingerprint = self._claimed_fingerprint(scope, key, fence)
        params = {
            "status_code": stored.status,
            "response_headers": stored.headers_json(),
            "response_body": stored.body,
            "mac": authentication.sign(
                scope, key, fingerprint=fingerprint, fence=fence, stored=stored, ttl=ttl
            ),
            "scope": scope,
            "key": key,
            "fence": fence,
            **sql.Clock(connection).params(ttl=ttl),
        }
        with connection.cursor() as cursor:
            cursor.execute(self._sql(connection).complete, params)
            updated = cursor.rowcount
        if updated:
            purge_now_and_then(self.using)
        return bool(updated)

    def _claimed_fingerprint(self, scope: str, key: str, fence: int) -> str:
        found = (
            self._records()
            .filter(scope=scope, key=key, fence=fence)
            .values_list("fingerprint", flat=True)
        )
        return next(iter(found), "")

    @busy
    @outage_raises_unavailable("database")
    def count_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        """One atomic count in the ``RecordQuota`` table
        (:func:`~idempotency.stores.record_quota.count_new_record`)."""
        return count_new_record(self.using, scope, window=window)

    @outage_raises_unavailable("database")
    def delete(self, scope: str, key: str) -> bool:
        deleted, _ = self._records().filter(scope=scope, key=key).delete()
        self.forget_cached(scope, key)
        return bool(deleted)


def _replaceable(found: KeyState) -> bool:
    """A looked-up record a claim may take: an in-progress one whose lease ran out
    (:meth:`DatabaseStore._state` gives a live one the time left, ``retry_after > 0``)."""
    return found.status is ClaimStatus.IN_PROGRESS and found.retry_after <= 0


def database_store(database: str | None = None) -> DatabaseStore:
    """The configured :class:`DatabaseStore` on ``database`` (None: the first one
    configured, ``"default"`` first), with its response cache and key prefix; where none is
    configured there, a plain one on ``database`` (or ``"default"``).

    What works on the records' table outside a request (the admin's release, the sample's
    locks) finds its store here."""
    from idempotency.stores import stores

    for alias in database_aliases():
        store = stores[alias]
        assert isinstance(store, DatabaseStore)  # noqa: S101 - its class is one
        if database is None or store.using == database:
            return store
    return DatabaseStore(database=database or "default")
