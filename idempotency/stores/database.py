"""DatabaseStore: records in the ``IdempotencyRecord`` table (the default store).

The unique constraint on ``(scope, key)`` decides every race: a claim is an
``INSERT … ON CONFLICT`` statement (PostgreSQL and SQLite) or an ``INSERT … ON
DUPLICATE KEY UPDATE`` (MySQL and MariaDB), never a read followed by an unguarded
write. A free key costs one short insert (``DO NOTHING``); only an expired record or an
abandoned lease is replaced, by an upsert. It is the only store that supports *atomic
mode*, where the record commits in the same transaction as the view's writes.

The module reads top to bottom: the response cache (:class:`ResponseCache`) and atomic
mode's held savepoint releases (:class:`ReleaseBatch`), each under a comment that says how
it works; :func:`busy`, which retries a statement that lost a lock wait or answers a clear
503; the class (its options and table, the contract, a running owner's updates, the
record quota, atomic mode's transaction, the helpers its statements share); and the purge
of expired records. The SQL text of each vendor lives in :mod:`~idempotency.stores.sql`."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import logging
import math
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Concatenate, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.apps import apps
from django.core.cache import caches
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

from idempotency import signals
from idempotency.codecs import UndecodableBody, seal, unseal
from idempotency.conf import Setting, idempotency_settings
from idempotency.exceptions import RecordForged, StoreUnavailable
from idempotency.stores import sql
from idempotency.stores.base import (
    AtomicStore,
    ClaimLocked,
    configured_database,
    database_aliases,
    stores,
)
from idempotency.stores.records import (
    ClaimStatus,
    KeyState,
    StoredResponse,
    new_fence,
    quota_window,
    record_digest,
    sign,
    verify,
)
from idempotency.utils.backends import KEY_PREFIX
from idempotency.utils.caches import RawCache
from idempotency.utils.outages import (
    bursts,
    corrupted,
    is_deadlock,
    is_lock_error,
    outage_raises_unavailable,
)

# The read-through cache of completed responses in front of ``DatabaseStore``.
#
# With the ``response_cache`` option set to a cache alias (Redis recommended), completed
# responses are read from that cache first, and written to it by the first replay that
# reads them from the database: every later replay costs no SQL, and a first request pays
# no cache write. The cache is never the source of truth: any cache error falls back to
# the database.
#
# A cached response is bytes the library encodes itself (a JSON line of status,
# fingerprint, headers, fencing token and the database record's tag, then the body),
# authenticated as the database record is (a copy that fails is ignored, logged and
# counted: the database answers), read without the cache's serializer
# (:class:`~idempotency.utils.caches.RawCache`): a pickle written under its key is never
# unpickled. Its key names the database alias, so two ``DatabaseStore(database=...)``
# sharing one cache never answer each other's records.


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
            expires = verify(
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
    database record's, :mod:`~idempotency.stores.records`), then the body as the
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


# Atomic mode sends the release of a view's savepoint with the statement after it.
#
# Under atomic mode a view's own ``transaction.atomic()`` is nested in the layer's
# transaction, so Django ends the view's block with ``RELEASE SAVEPOINT``: a round trip of
# its own that the same view without the layer does not make. While the layer's
# transaction is open, :class:`ReleaseBatch` (a Django execute wrapper on its connection)
# holds each release back and sends it in one query with the statement that follows it,
# usually the layer's own completion: the server runs the same statements in the same
# order, and the wait between them goes.
#
# Holding a release back changes nothing anyone can observe: a savepoint released one
# statement later contains the same work, and a rollback to an enclosing savepoint (or of
# the whole transaction) undoes it either way, so a release still held then is dropped
# instead (one of a savepoint older than the rollback's, which only hand-written
# ``savepoint_commit`` calls out of order leave, is sent before the rollback, as asked).
# ``SAVEPOINT`` itself is never held back: a statement that reaches the server around
# Django's cursor (psycopg's ``copy()``, ``callproc()``, the raw connection) would then
# run before the savepoint it belongs in, and a rollback of the block would keep it.
#
# While Django logs queries (``DEBUG``, ``CaptureQueriesContext``, ``assertNumQueries``,
# the debug toolbar) nothing is held back, so the log lists every statement as Django
# asked for it. Only psycopg 3's client-side binding cursor (Django's default) takes two
# statements in one query (the simple query protocol); on a server-side binding cursor,
# or another driver or database, a held release is sent on its own first, as Django
# would have.


#: Django's savepoint statements (``DatabaseOperations.savepoint_commit_sql`` and
#: ``savepoint_rollback_sql``, with the names ``BaseDatabaseWrapper.savepoint()`` gives).
#: The number after ``_x`` counts up on each connection: a larger one is a later savepoint.
_SAVEPOINT_END = re.compile(r'(RELEASE|ROLLBACK TO) SAVEPOINT "s\d+_x(\d+)"')


@functools.cache
def _client_cursor() -> type | None:
    """psycopg 3's client-side binding cursor, the one cursor that runs several
    statements in one query; None without psycopg 3."""
    try:
        from psycopg import ClientCursor
    except ImportError:
        return None
    return ClientCursor


class ReleaseBatch:
    """A Django execute wrapper that sends ``RELEASE SAVEPOINT`` with the next statement."""

    __slots__ = ("_client_cursor", "held")

    def __init__(self) -> None:
        #: The releases not sent yet, in order.
        self.held: list[str] = []
        self._client_cursor = _client_cursor() or ()

    def __call__(
        self,
        execute: Callable[..., Any],
        sql: str,
        params: Any,
        many: bool,
        context: dict[str, Any],
    ) -> Any:
        if params is None and not many:
            ended = _SAVEPOINT_END.fullmatch(sql)
            if ended is not None:
                if ended.group(1) == "RELEASE":
                    self.held.append(sql)
                    return None
                # a rollback ends the savepoints made after its own: their releases go
                # unsent (with Django's nesting that is every release held); any other is
                # sent first, as it was asked for before
                target = int(ended.group(2))
                self.held = [r for r in self.held if _number(r) <= target]
        if not self.held:
            return execute(sql, params, many, context)
        held, self.held = self.held, []
        cursor = context["cursor"].cursor
        if many or not isinstance(cursor, self._client_cursor):
            for release in held:  # as Django would have sent them: one by one
                execute(release, None, False, context)
            return execute(sql, params, many, context)
        # the parameters merged first, as psycopg would merge them: its cache of parsed
        # statement texts then keeps hitting (a text joined to a savepoint's name is new
        # every time, and would evict the project's own statements from that cache)
        statement = sql if params is None else cursor.mogrify(sql, params)
        result = execute("; ".join([*held, statement]), None, False, context)
        for _release in held:
            cursor.nextset()  # the releases' results come first
        return result


def _number(release: str) -> int:
    """The counter in a held release's savepoint name."""
    return int(release.rsplit("_x", 1)[1].rstrip('"'))


def batches(connection: BaseDatabaseWrapper) -> bool:
    """Whether a release on ``connection`` can ride with the next statement: PostgreSQL
    through psycopg 3, while Django is not logging its queries (``DEBUG``, or a test
    capturing them: the log then shows every statement as Django asked for it)."""
    if connection.vendor != "postgresql" or connection.queries_logged:
        return False
    if _client_cursor() is None:
        return False
    return getattr(getattr(connection, "Database", None), "__name__", "") == "psycopg"


@contextmanager
def batched_releases(aliases: list[str]) -> Iterator[None]:
    """While open, a savepoint release on ``aliases`` rides with the statement after it
    (see the module's docstring). Open it inside the transaction and close it only where
    the transaction ends: a release still held then is never sent, since the commit or
    rollback ends every savepoint anyway."""
    installed = []
    for alias in aliases:
        connection = connections[alias]
        if batches(connection):
            wrapper = ReleaseBatch()
            connection.execute_wrappers.append(wrapper)
            installed.append((connection, wrapper))
    try:
        yield
    finally:
        for connection, wrapper in installed:
            connection.execute_wrappers.remove(wrapper)


__all__ = [
    "DEADLOCK_ATTEMPTS",
    "DatabaseStore",
    "PurgeResult",
    "busy",
    "database_store",
    "purge_expired_records",
    "purge_now_and_then",
]

#: Attempts of a store statement (or a MySQL purge batch) chosen as a deadlock's victim
#: outside a transaction.
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
    "idempotency.stores.database.DatabaseStore", "OPTIONS": {"database": "payments",
    "response_cache": "redis"}}`` (its ``options`` list what it takes).
    """

    #: ``OPTIONS`` of a database store (:mod:`idempotency.utils.backends`).
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
        return apps.get_model("idempotency", "IdempotencyRecord")

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
            expires = min(expires, verify(
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
        :func:`~idempotency.stores.sql._mysql_upsert`): ours when it holds our fence, else
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
        if not fingerprint:  # a caller that did not say: the claim's, which the tag binds
            fingerprint = self._claimed_fingerprint(scope, key, fence)
        params = {
            **_response_columns(scope, key, fingerprint, fence, response, ttl),
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
        PostgreSQL and SQLite (:func:`~idempotency.stores.sql.count_quota`:
        atomic, the row locked for that statement only in autocommit); elsewhere an
        update-or-insert in one short transaction."""
        RecordQuota = apps.get_model("idempotency", "RecordQuota")  # noqa: N806 - the model class
        start, left = quota_window(window, time.time())
        connection = connections[self.using]
        expires = datetime.fromtimestamp(start + window, tz=UTC)
        if connection.vendor in ("postgresql", "sqlite"):
            statement = sql.count_quota(connection, RecordQuota._meta.db_table)
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
        (:mod:`~idempotency.stores.database`)."""
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
                cursor.execute(sql.SET_LOCK_TIMEOUT, [timeout])

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
                cursor.execute(sql.SWAP_LOCK_TIMEOUT, [self._lock_timeout()])
                previous = cursor.fetchone()[0]
        elif vendor == "mysql" and timeout is not None:
            with connection.cursor() as cursor:
                cursor.execute(sql.SET_LOCK_WAIT, [max(1, math.ceil(timeout))])
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
                    cursor.execute(sql.RESTORE_LOCK_WAIT)
        if vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(sql.SET_LOCK_TIMEOUT, [previous])
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
        hop Django's ORM takes; :class:`~idempotency.stores.redis.RedisStore` has no hop at all.
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
        so MySQL's is :class:`~idempotency.stores.sql.UTCNow`)."""
        vendor = connections[self.using].vendor
        if vendor == "postgresql":
            return Now()
        if vendor == "mysql":
            return sql.UTCNow()
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
        return {
            **values,
            "state": "completed",
            **_response_columns(scope, key, fingerprint, fence, stored, ttl),
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


def _response_columns(
    scope: str, key: str, fingerprint: str, fence: int, response: StoredResponse, ttl: float
) -> dict[str, Any]:
    """A completed record's response columns: the body as kept (``BODY_CODEC``) and the
    tag over the record (:func:`~idempotency.stores.records.sign`)."""
    stored = response._replace(body=seal(response.body))
    return {
        "status_code": stored.status,
        "response_headers": stored.headers_json(),
        "response_body": stored.body,
        "mac": sign(scope, key, fingerprint=fingerprint, fence=fence, stored=stored, ttl=ttl),
    }


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
    for alias in database_aliases():
        store = stores[alias]
        if isinstance(store, DatabaseStore) and database in (None, store.using):
            return store
    return DatabaseStore(database=database or "default")


# -- the purge of expired records -------------------------------------------------------------
#
# Delete expired idempotency records in bounded batches.
#
# An expired record is already treated as absent by every store, so purging only
# reclaims space; it never changes behaviour. Only :class:`DatabaseStore` needs
# it: Redis and cache records expire by themselves.
#
# Each batch is its own short transaction over at most ``batch_size`` rows, found
# through the ``expires_at`` index, so a purge of millions of rows never holds
# locks for long and can be stopped (``max_batches``) and resumed at any time.
# On PostgreSQL a batch is one ``DELETE … WHERE id IN (SELECT … FOR UPDATE SKIP
# LOCKED)`` statement, so concurrent purges share the work instead of queueing; on
# MySQL and MariaDB, which refuse a subquery on the table being deleted from, one
# ``DELETE … ORDER BY expires_at LIMIT n`` under a named lock, so concurrent purges take
# turns; elsewhere a batch selects the primary keys, then deletes them.
#
# Expired records are never held in the response cache past their TTL, so there
# is nothing else to invalidate.
#
# Without a Celery beat or a cron job, :func:`purge_now_and_then` keeps the table
# bounded on its own: every ``PURGE_EVERY``-th record a process completes, it deletes
# one batch of at most ``PURGE_EVERY_BATCH`` expired records, after the commit of the
# transaction that completed it (on PostgreSQL a ``SKIP LOCKED`` delete that waits for
# no lock). A failure there is logged and never reaches the request.


def _record_model() -> Any:
    return apps.get_model("idempotency", "IdempotencyRecord")


#: The purge's logger (its name is documented: docs/howto/data-at-rest.md).
logger = logging.getLogger("idempotency.stores.purge")


@dataclass(frozen=True, slots=True)
class PurgeResult:
    """What one purge did (or, for a dry run, would do)."""

    #: Records deleted (in a dry run, records that would be deleted).
    deleted: int
    #: Batches that deleted at least one record (in a dry run, batches that would).
    batches: int
    #: Wall-clock seconds of the whole purge.
    seconds: float
    #: Wall-clock seconds of the slowest batch, the longest its locks were held.
    longest_batch_seconds: float


def purge_expired_records(
    *,
    batch_size: int | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    max_batches: int | None = None,
    using: str | None = None,
) -> PurgeResult:
    """Delete the records whose ``expires_at`` is at or before ``now``.

    :param batch_size: rows per batch (default: ``PURGE_BATCH_SIZE``).
    :param dry_run: count what would be deleted, delete nothing.
    :param now: the cut-off (default: the current time, by the database server's clock on
        PostgreSQL, MySQL and MariaDB).
    :param max_batches: stop after this many batches (default: until none are left).
    :param using: database alias (default: the database of the configured
        database store).
    """
    size = int(idempotency_settings.PURGE_BATCH_SIZE if batch_size is None else batch_size)
    if size < 1:
        raise ValueError(f"batch_size must be a positive integer, not {batch_size!r}")
    if max_batches is not None and max_batches < 1:
        raise ValueError(f"max_batches must be a positive integer, not {max_batches!r}")
    alias = using or configured_database()
    cutoff = now or _database_now(alias)
    started = time.perf_counter()

    if dry_run:
        expired = _record_model().objects.using(alias).filter(expires_at__lte=cutoff).count()
        if max_batches is not None:
            expired = min(expired, size * max_batches)
        result = PurgeResult(
            deleted=expired,
            batches=math.ceil(expired / size),
            seconds=time.perf_counter() - started,
            longest_batch_seconds=0.0,
        )
        logger.info("Would purge %d expired idempotency records.", result.deleted)
        return result

    connection = connections[alias]
    delete_batch = {
        "postgresql": _delete_batch_postgresql,
        "mysql": _delete_batch_mysql,
    }.get(connection.vendor, _delete_batch)
    deleted = batches = 0
    longest = 0.0
    while max_batches is None or batches < max_batches:
        batch_started = time.perf_counter()
        count = delete_batch(connection, cutoff, size)
        if count:
            batches += 1
            deleted += count
            longest = max(longest, time.perf_counter() - batch_started)
        if count < size:
            # none left, or the rest is locked by a concurrent purge that will delete it
            break
    _delete_quotas(alias, cutoff, size, max_batches)
    result = PurgeResult(
        deleted=deleted,
        batches=batches,
        seconds=time.perf_counter() - started,
        longest_batch_seconds=longest,
    )
    signals.purged.send(sender=_record_model(), deleted=result.deleted, using=alias)
    logger.info(
        "Purged %d expired idempotency records in %d batches (%.2f s, longest batch %.3f s).",
        result.deleted,
        result.batches,
        result.seconds,
        result.longest_batch_seconds,
    )
    return result


def _delete_quotas(alias: str, cutoff: datetime, size: int, max_batches: int | None) -> int:
    """Delete the counters of ``MAX_NEW_RECORDS`` whose window has ended, in batches."""
    quotas = apps.get_model("idempotency", "RecordQuota").objects.using(alias)
    deleted = batches = 0
    while max_batches is None or batches < max_batches:
        pks = list(quotas.filter(expires_at__lte=cutoff).values_list("pk", flat=True)[:size])
        if pks:
            deleted += quotas.filter(pk__in=pks).delete()[0]
            batches += 1
        if len(pks) < size:
            return deleted
    return deleted


def _database_now(alias: str) -> datetime:
    """The current time by the clock the store judges expiry with: PostgreSQL's or
    MySQL's own (so an application server whose clock runs ahead never purges live
    records)."""
    connection = connections[alias]
    if connection.vendor not in sql.SERVER_CLOCK_VENDORS:
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql.now_sql(connection)}")
        value = cursor.fetchone()[0]
    moment = sql.as_datetime(connection, value)
    if moment is None:  # pragma: no cover - a server's clock is never NULL
        raise DatabaseError(f"The database {alias!r} answered NULL for the current time.")
    return moment


def _delete_batch(connection: BaseDatabaseWrapper, cutoff: datetime, size: int) -> int:
    """One batch on any database: select up to ``size`` primary keys, delete them."""
    records = _record_model().objects.using(connection.alias)
    with transaction.atomic(using=connection.alias):
        pks = list(
            records.filter(expires_at__lte=cutoff)
            .order_by("expires_at")
            .values_list("pk", flat=True)[:size]
        )
        chunk = connection.features.max_query_params or len(pks) or 1
        deleted = 0
        for start in range(0, len(pks), chunk):
            # expires_at again: a record claimed anew since the select is live and stays
            count, _ = records.filter(
                pk__in=pks[start : start + chunk], expires_at__lte=cutoff
            ).delete()
            deleted += count
    return deleted


def _delete_batch_postgresql(connection: BaseDatabaseWrapper, cutoff: datetime, size: int) -> int:
    """One batch on PostgreSQL: a single statement; rows another purge holds are skipped."""
    qn = connection.ops.quote_name
    meta = _record_model()._meta
    table, pk = qn(meta.db_table), qn(meta.pk.column)
    statement = (
        f"DELETE FROM {table} WHERE {pk} IN ("
        f"SELECT {pk} FROM {table} WHERE {qn('expires_at')} <= %s "
        f"ORDER BY {qn('expires_at')} LIMIT %s FOR UPDATE SKIP LOCKED)"
    )
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(statement, [cutoff, size])
        return int(cursor.rowcount)


#: Records this process completed on DatabaseStore (for :func:`purge_now_and_then`).
_completions = itertools.count(1)


def purge_now_and_then(using: str) -> None:
    """Count one completed record of the database ``using``; on every ``PURGE_EVERY``-th,
    delete one bounded batch of expired records once the current transaction commits
    (at once outside one)."""
    every = idempotency_settings.PURGE_EVERY
    if not every or next(_completions) % int(every):
        return
    if connections[using].in_atomic_block:
        transaction.on_commit(lambda: _purge_a_batch(using), using=using)
    else:
        _purge_a_batch(using)


def _purge_a_batch(using: str) -> None:
    try:
        purge_expired_records(
            batch_size=int(idempotency_settings.PURGE_EVERY_BATCH), max_batches=1, using=using
        )
    except Exception:  # noqa: BLE001 - housekeeping never fails the request it rides on
        logger.warning("idempotency: the purge on the request path failed", exc_info=True)


def reset_purge_counter() -> None:
    """Start counting completions afresh (tests)."""
    global _completions
    _completions = itertools.count(1)


def _delete_batch_mysql(connection: BaseDatabaseWrapper, cutoff: datetime, size: int) -> int:
    """One batch on MySQL and MariaDB: one ``DELETE … ORDER BY expires_at LIMIT n`` through
    the ``expires_at`` index, while holding a named lock (``GET_LOCK``) of this database's
    purge, so concurrent purges take turns batch by batch. MySQL refuses PostgreSQL's
    single statement (a subquery on the table deleted from), and concurrent batches
    deadlocked on the table's other indexes, measured on MariaDB 10.11 both as one
    ``DELETE … LIMIT`` and as ``SELECT … FOR UPDATE SKIP LOCKED`` then ``DELETE``. A
    purge that waits 30 s for its turn stops: another one is at work. A deadlock with
    the claims' inserts rolls the batch back, and it runs again."""
    qn = connection.ops.quote_name
    statement = (
        f"DELETE FROM {qn(_record_model()._meta.db_table)} WHERE {qn('expires_at')} <= %s "
        f"ORDER BY {qn('expires_at')} LIMIT %s"
    )
    name = hashlib.sha256(f"idempotency:purge:{connection.settings_dict['NAME']}".encode())
    with connection.cursor() as cursor:
        cursor.execute("SELECT GET_LOCK(%s, 30)", [name.hexdigest()])
        if cursor.fetchone()[0] != 1:
            return 0
        try:
            for attempt in range(1, DEADLOCK_ATTEMPTS + 1):
                try:
                    with transaction.atomic(using=connection.alias):
                        value = connection.ops.adapt_datetimefield_value(cutoff)
                        cursor.execute(statement, [value, size])
                        return int(cursor.rowcount)
                except OperationalError as exc:
                    if not is_deadlock(exc) or attempt == DEADLOCK_ATTEMPTS:
                        raise
            return 0  # pragma: no cover - the loop returns or raises
        finally:
            cursor.execute("SELECT RELEASE_LOCK(%s)", [name.hexdigest()])
