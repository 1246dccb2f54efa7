"""DatabaseStore: records in the ``IdempotencyRecord`` table (the default store).

The unique constraint on ``(scope, key)`` decides every race: a claim is an
``INSERT … ON CONFLICT`` statement (PostgreSQL and SQLite) or an ``INSERT … ON
DUPLICATE KEY UPDATE`` (MySQL and MariaDB), never a read followed by an unguarded
write. A free key costs one short insert (``DO NOTHING``);
only an expired record or an abandoned lease is replaced, by an upsert. It is the
only store that supports *atomic mode*, where the record commits in the same
transaction as the view's writes. The SQL lives in
:mod:`~idempotency.stores.statements`, the response cache in
:mod:`~idempotency.stores.response_cache`.

With ``RESPONSE_CACHE`` set to a cache alias (Redis recommended), completed
responses are read from that cache first, and written to it by the first replay
that reads them from the database: every later replay costs no SQL, and a first
request pays no cache write.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, ParamSpec, TypeVar, cast

from asgiref.sync import sync_to_async
from django.core.cache import BaseCache
from django.db import IntegrityError, OperationalError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import DateTimeField, ExpressionWrapper, F
from django.db.models.functions import Greatest, Now
from django.utils import timezone

from idempotency.codecs import UndecodableBody, seal, unseal
from idempotency.conf import idempotency_settings
from idempotency.core.outages import is_deadlock, is_lock_error, outage_raises_unavailable
from idempotency.exceptions import StoreUnavailable
from idempotency.stores import statements as sql
from idempotency.stores.atomic import AtomicStore
from idempotency.stores.base import (
    Claim,
    ClaimStatus,
    StoredResponse,
    corrupted,
    new_fence,
    quota_window,
)
from idempotency.stores.purge import purge_now_and_then
from idempotency.stores.response_cache import ResponseCache

#: Attempts of a store statement chosen as a deadlock's victim outside a transaction.
DEADLOCK_ATTEMPTS = 3

M = TypeVar("M", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")


def busy(method: M) -> M:
    """A store call whose lock wait ended without the lock (a deadlock, MySQL's 1213 or
    PostgreSQL's 40P01; a lock wait timeout, 1205 or 55P03) is never a bare 500.

    Outside a transaction the statement alone was rolled back: a deadlock's victim is
    run again (up to :data:`DEADLOCK_ATTEMPTS` times, after a short jittered pause), and a
    lock wait that ran out, or a deadlock that keeps coming back, raises
    :class:`StoreUnavailable` (503 with ``Retry-After``: nothing ran, retry later).
    Inside one (atomic mode) the error goes to the transaction's owner, which answers it:
    the server may have rolled the whole transaction back, so only it can start again.
    """

    @functools.wraps(method)
    def wrapper(self: DatabaseStore, *args: Any, **kwargs: Any) -> Any:
        for attempt in range(1, DEADLOCK_ATTEMPTS + 1):
            try:
                return method(self, *args, **kwargs)
            except OperationalError as exc:
                if not is_lock_error(exc) or connections[self.using].in_atomic_block:
                    raise
                if not is_deadlock(exc) or attempt == DEADLOCK_ATTEMPTS:
                    raise StoreUnavailable(
                        "The idempotency store is busy (a lock wait ran out), so this "
                        "request was not run; retry later.",
                        retry_after=int(idempotency_settings.RETRY_AFTER),
                    ) from exc
                time.sleep(random.uniform(0.005, 0.02) * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    return cast(M, wrapper)


class DatabaseStore(ResponseCache, AtomicStore):
    """Records in the ``IdempotencyRecord`` table of ``DATABASE_ALIAS`` (the default store).

    The claim is an ``INSERT ... ON CONFLICT`` (PostgreSQL and SQLite) or ``INSERT ... ON
    DUPLICATE KEY UPDATE`` (MySQL and MariaDB) on the unique ``(scope, key)`` index;
    completion and release check the fencing token. It is the only store with atomic
    mode: the claim, the view's writes and the stored response commit in one
    transaction. On PostgreSQL, MySQL and MariaDB leases and expiry are judged by the
    server's clock. Construct one for a view: ``DatabaseStore(using="payments",
    response_cache="redis")``.
    """

    #: A claim that meets a live record needs a second statement to read it, so a
    #: repeat is cheapest as one lookup.
    lookup_before_claim: ClassVar[bool] = True

    def __init__(self, using: str | None = None, *, response_cache: str | None = None) -> None:
        """``using``: database alias (default ``DATABASE_ALIAS``); ``response_cache``: cache
        alias of this store's response cache (default ``RESPONSE_CACHE``), so one view can
        cache its replays while the others do not: ``@idempotent(store=DatabaseStore(
        response_cache="redis"))``."""
        self._using = using
        self._response_cache = response_cache
        # SQL text per (database alias, vendor): built once, not on every request
        self._statements: dict[tuple[str, str], sql.Statements] = {}

    # -- helpers -------------------------------------------------------------------------

    @property
    def using(self) -> str:
        return self._using or str(idempotency_settings.DATABASE_ALIAS)

    @property
    def model(self) -> Any:
        from idempotency.models import IdempotencyRecord

        return IdempotencyRecord

    def _records(self) -> Any:
        return self.model.objects.using(self.using)

    async def run_in_thread(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Every ``a*`` twin: the sync call in a thread of the loop's default executor.

        Django's ORM has no async cursor to await: its ``a*`` query methods are
        ``sync_to_async`` wrappers themselves, in the one thread-sensitive thread. Here
        the call runs in any executor thread, which keeps a connection of its own (Django's
        connections are per thread). Django checks a connection's health and age only at
        request boundaries (``close_old_connections`` on ``request_started`` and
        ``request_finished``), in the thread that serves the request: never in these
        threads. So the call does it itself, before and after: a connection the server
        dropped (a restart, ``pg_terminate_backend``, an idle timeout) or older than
        ``CONN_MAX_AGE`` is closed, and the next call opens a new one instead of failing
        on the dead one forever."""
        alias = self.using

        def call() -> R:
            connection = connections[alias]
            connection.close_if_unusable_or_obsolete()
            try:
                return func(*args, **kwargs)
            finally:
                connection.close_if_unusable_or_obsolete()

        # SQLite serialises writers per database file, and its connections in other
        # threads only meet "database is locked": there, Django's one sync thread, as
        # its own async ORM does
        sqlite = connections[alias].vendor == "sqlite"
        return await sync_to_async(call, thread_sensitive=sqlite)()

    def _sql(self, connection: BaseDatabaseWrapper) -> sql.Statements:
        """The statements on ``connection``, built on first use."""
        cache_key = (connection.alias, connection.vendor)
        try:
            return self._statements[cache_key]
        except KeyError:
            pass
        built = sql.build(connection, self.model._meta.db_table)
        self._statements[cache_key] = built
        return built

    # -- the contract --------------------------------------------------------------------

    @busy
    @outage_raises_unavailable("database")
    def lookup(self, scope: str, key: str, *, fingerprint: str) -> Claim | None:
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
        if len(found) > 9:  # PostgreSQL, MySQL: epoch seconds, judged by the server's clock
            now, lease, expires = found[9], found[2], found[8]
        else:  # judged by ours, the clock the statements' times came from (sql.Clock)
            now = timezone.now().timestamp()
            lease, expires = sql.as_epoch(connection, found[2]), sql.as_epoch(connection, found[8])
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
    ) -> Claim | None:
        """The state of a record read as :data:`~statements.LOOKUP_FIELDS`, its lease and
        expiry in seconds since the epoch, judged at ``now`` (None when expired: absent,
        even before it is purged)."""
        fp, state, _lease, status, headers, body, point, data = row[:8]
        if expires is None or expires <= now:
            return None
        if fp != fingerprint:
            return Claim(ClaimStatus.MISMATCH, fingerprint=fp)
        if state == "completed":
            kept = StoredResponse.from_parts(status, headers, body)
            try:
                response = kept._replace(body=unseal(kept.body))
            except UndecodableBody as exc:
                raise corrupted(self, scope, key, exc) or exc from exc
            if cache is not None:  # the cache keeps the body as the database does
                self._cache_response(scope, key, fingerprint, kept, expires - now)
            return Claim(ClaimStatus.COMPLETED, response=response, expires_at=expires)
        data = sql.as_json(data)
        if lease is not None and lease <= now:
            # an abandoned lease: the next claim takes it over
            return Claim(ClaimStatus.IN_PROGRESS, recovery_point=point, recovery_data=data)
        retry = lease - now if lease is not None else 1.0
        return Claim(
            ClaimStatus.IN_PROGRESS,
            recovery_point=point,
            recovery_data=data,
            retry_after=retry,
        )

    def peek(self, scope: str, key: str, *, fingerprint: str) -> Claim | None:
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
    ) -> Claim:
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
                    return Claim(ClaimStatus.CLAIMED, fence=fence)
                point, data, taken_over = returned
                return Claim(
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
        return Claim(ClaimStatus.IN_PROGRESS, retry_after=1.0)

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
    ) -> Claim:
        """MySQL and MariaDB: the upsert, then the row it left (see
        :func:`~idempotency.stores.statements._mysql_upsert`): ours when it holds our fence,
        else the live record that keeps the key, answered like a lookup."""
        for _attempt in range(5):
            fence = new_fence()
            params = self._values(
                connection, scope, key, fingerprint, fence, method, route, lease=lease, ttl=ttl
            )
            row = _upsert_mysql(connection, statements, statements.claim, params)
            if row is None:
                continue  # released between the upsert and the read: claim again
            if row[0] == fence:
                return Claim(
                    ClaimStatus.CLAIMED,
                    fence=fence,
                    recovery_point=row[7] or "",
                    recovery_data=sql.as_json(row[8]),
                    taken_over=bool(row[11]),
                )
            found = row[1:11]
            existing = self._state(
                scope, key, fingerprint, found, found[2], found[8], found[9], self.response_cache
            )
            if existing is not None and not _replaceable(existing):
                return existing
            # its lease or TTL ran out between the upsert and the read: claim again
        return Claim(ClaimStatus.IN_PROGRESS, retry_after=1.0)

    @staticmethod
    def _values(
        connection: BaseDatabaseWrapper,
        scope: str,
        key: str,
        fingerprint: str,
        fence: int,
        method: str,
        route: str,
        *,
        lease: float | None,
        ttl: float,
        response: StoredResponse | None = None,
    ) -> dict[str, Any]:
        """The parameters of an upsert: a claim when ``lease`` is given, else a completed
        record holding ``response``."""
        clock = sql.Clock(connection)
        values = {
            "scope": scope,
            "key": key,
            "fingerprint": fingerprint,
            "fence": fence,
            "method": method[:10],
            "route": route[:255],
        }
        if lease is not None:  # a claim: its state and response columns are in the text
            return {**values, **clock.params(lease=lease, ttl=ttl)}
        return {
            **values,
            "state": "completed",
            "status_code": response.status if response else None,
            "response_headers": response.headers_json() if response else "[]",
            "response_body": seal(response.body) if response else None,
            **clock.params(ttl=ttl),
        }

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
            row = _upsert_mysql(connection, statements, statements.insert, {**params, "lease": 0})
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
        params = {
            "status_code": response.status,
            "response_headers": response.headers_json(),
            "response_body": seal(response.body),
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

    def _now_value(self) -> Any:
        """ "Now" for an ORM update: the database server's clock on PostgreSQL and MySQL
        (Django's ``Now()`` is ``CURRENT_TIMESTAMP(6)`` there, in the session's time zone,
        so MySQL's is :class:`UTCNow`)."""
        vendor = connections[self.using].vendor
        if vendor == "postgresql":
            return Now()
        if vendor == "mysql":
            return UTCNow()
        return timezone.now()

    def release(self, scope: str, key: str, *, fence: int) -> bool:
        """Free the key if ``fence`` still owns it. When the owner's connection is the one
        that died (``pg_terminate_backend``, a failover, a restarted PgBouncer), the
        release is retried once on a fresh connection: otherwise every retry would get
        409 until the lease ran out."""
        try:
            return self._release(scope, key, fence=fence)
        except StoreUnavailable:
            connection = connections[self.using]
            if connection.in_atomic_block:
                raise  # a transaction cannot be left here: the lease ends the claim
            connection.close()
            return self._release(scope, key, fence=fence)

    @busy
    @outage_raises_unavailable("database")
    def _release(self, scope: str, key: str, *, fence: int) -> bool:
        records = self._records().filter(scope=scope, key=key, fence=fence, state="in_progress")
        deleted, _ = records.filter(recovery_point="").delete()
        if deleted:
            return True
        # a recovery point was recorded: keep it, end the lease so a retry resumes at once
        return bool(records.update(lease_expires_at=self._now_value()))

    @busy
    @outage_raises_unavailable("database")
    def extend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
        now = self._now_value()
        later = now + timedelta(seconds=lease)
        if not isinstance(now, datetime):  # PostgreSQL: the server's clock
            later = ExpressionWrapper(now + timedelta(seconds=lease), DateTimeField())
        updated = (
            self._records()
            .filter(scope=scope, key=key, fence=fence, state="in_progress", expires_at__gt=now)
            .update(lease_expires_at=later, expires_at=Greatest(F("expires_at"), later))
        )
        return bool(updated)

    def renewable(self) -> bool:
        return not connections[self.using].in_atomic_block

    @busy
    @outage_raises_unavailable("database")
    def save_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        return bool(
            self._records()
            .filter(scope=scope, key=key, fence=fence, state="in_progress")
            .update(recovery_point=name, recovery_data=data)
        )

    @busy
    @outage_raises_unavailable("database")
    def count_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        """One upsert of the (scope, window) row of ``RecordQuota`` on PostgreSQL and
        SQLite (``INSERT … ON CONFLICT DO UPDATE … RETURNING``: atomic, the row locked
        for that statement only in autocommit); elsewhere an update-or-insert in one
        short transaction."""
        from idempotency.models import RecordQuota

        start, left = quota_window(window, time.time())
        connection = connections[self.using]
        expires = datetime.fromtimestamp(start + window, tz=UTC)
        if connection.vendor in ("postgresql", "sqlite"):
            qn = connection.ops.quote_name
            table = qn(RecordQuota._meta.db_table)
            scope_, window_, count, expires_at = (
                qn(c) for c in ("scope", "window", "count", "expires_at")
            )
            statement = (
                f"INSERT INTO {table} ({scope_}, {window_}, {count}, {expires_at}) "
                f"VALUES (%s, %s, 1, %s) ON CONFLICT ({scope_}, {window_}) "
                f"DO UPDATE SET {count} = {table}.{count} + 1 RETURNING {count}"
            )
            value = connection.ops.adapt_datetimefield_value(expires)
            with connection.cursor() as cursor:
                cursor.execute(statement, [scope, start, value])
                return int(cursor.fetchone()[0]), left
        rows = RecordQuota.objects.using(self.using).filter(scope=scope, window=start)
        with transaction.atomic(using=self.using):
            if not rows.update(count=F("count") + 1):
                try:
                    with transaction.atomic(using=self.using):
                        rows.create(scope=scope, window=start, count=1, expires_at=expires)
                    return 1, left
                except IntegrityError:  # a concurrent first one: count on it
                    rows.update(count=F("count") + 1)
            return int(rows.values_list("count", flat=True).get()), left

    @outage_raises_unavailable("database")
    def delete(self, scope: str, key: str) -> bool:
        deleted, _ = self._records().filter(scope=scope, key=key).delete()
        self.forget_cached(scope, key)
        return bool(deleted)


class UTCNow(Now):
    """MySQL's and MariaDB's clock in UTC, the time zone Django stores datetimes in."""

    def as_mysql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return self.as_sql(compiler, connection, template=sql.MYSQL_NOW, **extra_context)


def _upsert_mysql(
    connection: BaseDatabaseWrapper, statements: sql.Statements, upsert: str, params: Any
) -> Any:
    """Run a MySQL upsert and read the row it left (None: gone in between)."""
    assert statements.owner is not None
    with connection.cursor() as cursor:
        cursor.execute(upsert, params)
        cursor.execute(statements.owner, params)
        return cursor.fetchone()


def _replaceable(found: Claim) -> bool:
    """A looked-up record a claim may take: an in-progress one whose lease ran out
    (:meth:`DatabaseStore._state` gives a live one the time left, ``retry_after > 0``)."""
    return found.status is ClaimStatus.IN_PROGRESS and found.retry_after <= 0
