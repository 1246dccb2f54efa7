"""DatabaseStore: records in the ``IdempotencyRecord`` table (the default store).

The unique constraint on ``(scope, key)`` decides every race: a claim is an
``INSERT … ON CONFLICT`` statement (PostgreSQL and SQLite) or an ``INSERT … ON
DUPLICATE KEY UPDATE`` (MySQL and MariaDB), never a read followed by an unguarded
write. A free key costs one short insert (``DO NOTHING``); only an expired record or an
abandoned lease is replaced, by an upsert. It is the only store that supports *atomic
mode*, where the record commits in the same transaction as the view's writes.

The class reads top to bottom: its options and table, the contract (lookup, claim,
complete), a running owner's updates (release, keep-alive, recovery points), the record
quota, atomic mode's transaction, and the helpers its statements share. The SQL text of
each vendor lives in :mod:`~idempotency.stores.sql`, the response cache in
:mod:`~idempotency.stores.response_cache`, atomic mode's held savepoint releases in
:mod:`~idempotency.stores.savepoints`. A statement that loses a lock wait is retried or
answered as a clear 503 (:func:`busy`).

With the ``response_cache`` option set to a cache alias (Redis recommended), completed
responses are read from that cache first, and written to it by the first replay
that reads them from the database: every later replay costs no SQL, and a first
request pays no cache write.
"""

from __future__ import annotations

import contextlib
import functools
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Concatenate, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import (
    DatabaseError,
    IntegrityError,
    OperationalError,
    connections,
    transaction,
)
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import DateTimeField, ExpressionWrapper, F
from django.db.models.functions import Greatest, Now
from django.utils import timezone

from idempotency.codecs import UndecodableBody, seal, unseal
from idempotency.conf import Setting, idempotency_settings
from idempotency.core.backends import KEY_PREFIX
from idempotency.core.outages import is_deadlock, is_lock_error, outage_raises_unavailable
from idempotency.exceptions import StoreUnavailable
from idempotency.stores import authentication, sql
from idempotency.stores.base import AtomicStore, ClaimLocked
from idempotency.stores.errors import corrupted
from idempotency.stores.purge import purge_now_and_then
from idempotency.stores.records import (
    ClaimStatus,
    KeyState,
    StoredResponse,
    new_fence,
    quota_window,
)
from idempotency.stores.response_cache import ResponseCache
from idempotency.stores.savepoints import batched_releases

__all__ = ["DEADLOCK_ATTEMPTS", "DatabaseStore", "busy", "database_store"]

#: Attempts of a store statement chosen as a deadlock's victim outside a transaction.
DEADLOCK_ATTEMPTS = 3

S = TypeVar("S", bound="DatabaseStore")
P = ParamSpec("P")
R = TypeVar("R")


def busy(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """A store call whose lock wait ended without the lock (a deadlock, MySQL's 1213 or
    PostgreSQL's 40P01; a lock wait timeout, 1205 or 55P03) is never a bare 500.

    Outside a transaction the statement alone was rolled back: a deadlock's victim is
    run again (up to :data:`DEADLOCK_ATTEMPTS` times, after a short jittered pause), and a
    lock wait that ran out, or a deadlock that keeps coming back, raises
    :class:`StoreUnavailable` (503 with ``Retry-After``: nothing ran, retry later).
    Inside one (atomic mode) the error goes to the transaction's owner, which answers it:
    the server may have rolled the whole transaction back, so only it can start again.

    Any other failure outside a transaction drops a connection the server closed (a
    restart, a killed session: ``close_if_unusable_or_obsolete``) before it is raised, so
    the next call opens a new one: a completion retried while its lease lasts
    (``idempotency.core.engine``) reaches a server that came back, instead of failing
    on the dead connection until the request ends (Django checks it only between
    requests), as the ``a*`` twins do.
    """

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(1, DEADLOCK_ATTEMPTS + 1):
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:
                connection = connections[self.using]
                if connection.in_atomic_block:
                    raise
                if not isinstance(exc, OperationalError) or not is_lock_error(exc):
                    # an outage arrives as StoreUnavailable (outage_raises_unavailable)
                    connection.close_if_unusable_or_obsolete()
                    raise
                if not is_deadlock(exc) or attempt == DEADLOCK_ATTEMPTS:
                    raise StoreUnavailable(
                        "The idempotency store is busy (a lock wait ran out), so this "
                        "request was not run; retry later.",
                        retry_after=int(idempotency_settings.RETRY_AFTER),
                    ) from exc
                time.sleep(random.uniform(0.005, 0.02) * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    return wrapper


class DatabaseStore(AtomicStore):
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

    #: ``OPTIONS`` of a database store (:mod:`idempotency.core.backends`).
    options: ClassVar[Mapping[str, Setting]] = {
        "database": Setting(
            "default",
            "Database alias whose IdempotencyRecord table keeps the records.",
            "database",
        ),
        "response_cache": Setting(
            None,
            "Cache alias of a read-through cache of completed responses (Redis "
            "recommended): replays then cost no SQL. None: no response cache.",
            "cache",
            nullable=True,
        ),
        "key_prefix": KEY_PREFIX,
    }
    #: A claim that meets a live record needs a second statement to read it, so a
    #: repeat is cheapest as one lookup.
    lookup_before_claim: ClassVar[bool] = True

    def __init__(
        self,
        *,
        database: str = "default",
        response_cache: str | None = None,
        key_prefix: str = KEY_PREFIX.default,
    ) -> None:
        """``database``: database alias; ``response_cache``: cache alias of this store's
        response cache, or None; ``key_prefix``: prefix of the response cache's keys."""
        self.database = database
        self.key_prefix = key_prefix
        #: The read-through cache of completed responses, or None.
        self.response_cache = (
            ResponseCache(
                response_cache, database=database, key_prefix=key_prefix, owner=type(self)
            )
            if response_cache
            else None
        )
        # SQL text per (database alias, vendor): built once, not on every request
        self._statements: dict[tuple[str, str], sql.Statements] = {}

    # -- its table ------------------------------------------------------------------------

    @property
    def using(self) -> str:
        """The database alias (``database``)."""
        return self.database

    @property
    def model(self) -> Any:
        from idempotency.models import IdempotencyRecord

        return IdempotencyRecord

    def _records(self) -> Any:
        return self.model.objects.using(self.using)

    # -- the contract: lookup, claim, complete ----------------------------------------------

    @busy
    @outage_raises_unavailable("database")
    def lookup(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        responses = self.response_cache
        cached = responses.get(scope, key, fingerprint) if responses is not None else None
        if cached is not None:
            return cached
        connection = connections[self.using]
        # one SELECT through the unique (scope, key) index; plain SQL, because building it
        # with the ORM costs more than running it
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
        return self._state(scope, key, fingerprint, found, lease, expires, now, responses)

    def _state(
        self,
        scope: str,
        key: str,
        fingerprint: str,
        row: Any,
        lease: float | None,
        expires: float | None,
        now: float,
        responses: ResponseCache | None,
    ) -> KeyState | None:
        """The state of a record read as :data:`~idempotency.stores.sql.LOOKUP_FIELDS`, its
        lease and expiry in seconds since the epoch, judged at ``now`` (None when expired:
        absent, even before it is purged)."""
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
            if responses is not None:  # the cache keeps the body (and its tag) as the database does
                responses.put(scope, key, fp, kept, expires - now, fence=fence, tag=tag)
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
        return self.response_cache.get(scope, key, fingerprint)

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
        :func:`~idempotency.stores.sql.mysql.upsert`): ours when it holds our fence, else
        the live record that keeps the key, answered like a lookup."""
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

    # -- a running owner's updates, each fenced by its token ---------------------------------

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

    @outage_raises_unavailable("database")
    def delete(self, scope: str, key: str) -> bool:
        deleted, _ = self._records().filter(scope=scope, key=key).delete()
        self.forget_cached(scope, key)
        return bool(deleted)

    def forget_cached(self, scope: str, key: str) -> None:
        """Drop the response cache's copy of ``(scope, key)`` (a record deleted or
        rewritten)."""
        if self.response_cache is not None:
            self.response_cache.forget(scope, key)

    # -- the record quota -------------------------------------------------------------------

    @busy
    @outage_raises_unavailable("database")
    def count_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        """One more on the (scope, window) row of the ``RecordQuota`` table: one upsert on
        PostgreSQL and SQLite (:func:`~idempotency.stores.sql.postgresql.count_quota`:
        atomic, the row locked for that statement only in autocommit); elsewhere an
        update-or-insert in one short transaction."""
        from idempotency.models import RecordQuota

        start, left = quota_window(window, time.time())
        connection = connections[self.using]
        expires = datetime.fromtimestamp(start + window, tz=UTC)
        if connection.vendor in ("postgresql", "sqlite"):
            statement = sql.postgresql.count_quota(connection, RecordQuota._meta.db_table)
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

    # -- atomic mode: the transaction of one keyed run ---------------------------------------

    def atomic(self) -> contextlib.AbstractContextManager[Any]:
        """A transaction on the records' database."""
        return transaction.atomic(using=self.using)

    def outermost(self) -> bool:
        """Whether a transaction opened now is the outermost one on the records' database
        (under ``ATOMIC_REQUESTS`` it is nested in the request's)."""
        return not connections[self.using].in_atomic_block

    @contextmanager
    def transaction(self, aliases: list[str]) -> Iterator[None]:
        """One transaction over ``aliases`` (the records' database first, then every
        alias the work writes to), so a rollback leaves nothing behind in any of them;
        a savepoint release rides with the statement after it
        (:mod:`~idempotency.stores.savepoints`)."""
        if len(aliases) == 1:  # most views: no ExitStack (its callbacks cost every request)
            with transaction.atomic(using=aliases[0]), batched_releases(aliases):
                yield
            return
        with ExitStack() as stack:
            for alias in aliases:
                stack.enter_context(transaction.atomic(using=alias))
            stack.enter_context(batched_releases(aliases))
            yield

    def roll_back(self, aliases: list[str]) -> None:
        """Mark the open transaction over ``aliases`` for rollback (a released outcome:
        nothing of the attempt may stay, or a retry would double it)."""
        for alias in aliases:
            transaction.set_rollback(True, using=alias)

    def _lock_timeout(self) -> str | None:
        """``LOCK_TIMEOUT`` as PostgreSQL's ``lock_timeout`` value, or None where it does
        not apply (not set, or not PostgreSQL)."""
        timeout = idempotency_settings.LOCK_TIMEOUT
        if timeout is None or connections[self.using].vendor != "postgresql":
            return None
        return f"{max(1, int(timeout * 1000))}ms"

    def bound_lock_waits(self) -> None:
        """Cap lock waits in the open transaction at ``LOCK_TIMEOUT`` (PostgreSQL): the
        optimistic claim's insert then answers "in progress" instead of waiting long for
        a concurrent duplicate's commit. Off by default: a statement per request, and it
        also bounds the work's own lock waits."""
        timeout = self._lock_timeout()
        if timeout is not None:
            with connections[self.using].cursor() as cursor:
                cursor.execute(sql.postgresql.SET_LOCK_TIMEOUT, [timeout])

    def claim_in_transaction(
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
        """:meth:`claim` inside the open transaction. With ``LOCK_TIMEOUT`` only the wait
        on a concurrent duplicate's claim is bounded (lifted again before the work runs):
        PostgreSQL's ``lock_timeout`` for this transaction, MySQL's
        ``innodb_lock_wait_timeout`` for the session (whole seconds), put back after.
        A lock wait that ends without the lock raises :class:`ClaimLocked`."""
        connection = connections[self.using]
        timeout = idempotency_settings.LOCK_TIMEOUT
        vendor = connection.vendor if timeout is not None else ""
        previous = None
        if vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(sql.postgresql.SWAP_LOCK_TIMEOUT, [self._lock_timeout()])
                previous = cursor.fetchone()[0]
        elif vendor == "mysql" and timeout is not None:
            with connection.cursor() as cursor:
                cursor.execute(sql.mysql.SET_LOCK_WAIT, [max(1, math.ceil(timeout))])
        try:
            claimed = self.claim(
                scope,
                key,
                fingerprint=fingerprint,
                lease=lease,
                ttl=ttl,
                method=method,
                route=route,
            )
        except OperationalError as exc:
            if is_lock_error(exc):
                raise ClaimLocked(deadlock=is_deadlock(exc)) from exc
            raise
        finally:
            if vendor == "mysql":
                with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
                    # a session setting: it would outlive the transaction on this connection
                    cursor.execute(sql.mysql.RESTORE_LOCK_WAIT)
        if vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(sql.postgresql.SET_LOCK_TIMEOUT, [previous])
        return claimed

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

    # -- async: Django's sync thread ---------------------------------------------------------

    async def run_in_thread(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Every ``a*`` twin: the sync call in Django's sync thread, as Django's own async
        ORM runs its queries.

        Django has no async cursor to await (its ``aget``, ``acreate``… are
        ``sync_to_async`` wrappers), and a connection and its open transaction belong to
        one thread. Run in another thread, a record call would use another connection:
        outside the caller's transaction, and waiting forever on a row that transaction
        holds (a sync caller in ``transaction.atomic()`` calling an async function under
        the same key). So a database store's async calls take the one thread-sensitive
        hop Django's ORM takes; :class:`~idempotency.stores.RedisStore` has no hop at all.
        Django looks after that thread's connection at request boundaries; a call that
        fails outside a transaction also drops a connection the server killed
        (``close_if_unusable_or_obsolete``), so the next call opens a new one instead of
        failing on the dead one (a script's event loop has no request boundaries)."""
        alias = self.using

        def call() -> R:
            try:
                return func(*args, **kwargs)
            except Exception:
                connection = connections[alias]
                if not connection.in_atomic_block:  # never close a caller's transaction
                    connection.close_if_unusable_or_obsolete()
                raise

        return await sync_to_async(call, thread_sensitive=True)()

    # -- what the statements share ---------------------------------------------------------

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

    def _now_value(self) -> Any:
        """ "Now" for an ORM update: the database server's clock on PostgreSQL and MySQL
        (Django's ``Now()`` is ``CURRENT_TIMESTAMP(6)`` there, in the session's time zone,
        so MySQL's is :class:`~idempotency.stores.sql.mysql.UTCNow`)."""
        vendor = connections[self.using].vendor
        if vendor == "postgresql":
            return Now()
        if vendor == "mysql":
            return sql.mysql.UTCNow()
        return timezone.now()

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
        stored = StoredResponse(0) if response is None else response
        stored = stored._replace(body=seal(stored.body))
        return {
            **values,
            "state": "completed",
            "status_code": stored.status,
            "response_headers": stored.headers_json(),
            "response_body": stored.body,
            "mac": authentication.sign(
                scope, key, fingerprint=fingerprint, fence=fence, stored=stored, ttl=ttl
            ),
            **clock.params(ttl=ttl),
        }

    @staticmethod
    def _upsert_mysql(
        connection: BaseDatabaseWrapper, statements: sql.Statements, upsert: str, params: Any
    ) -> Any:
        """Run a MySQL upsert and read the row it left (None: gone in between)."""
        assert statements.owner is not None
        with connection.cursor() as cursor:
            cursor.execute(upsert, params)
            cursor.execute(statements.owner, params)
            return cursor.fetchone()


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
    from idempotency.stores import database_aliases, stores

    for alias in database_aliases():
        store = stores[alias]
        if isinstance(store, DatabaseStore) and database in (None, store.using):
            return store
    return DatabaseStore(database=database or "default")
