"""DatabaseStore: records in the ``IdempotencyRecord`` table (the default store).

The unique constraint on ``(scope, key)`` decides every race: a claim is one
``INSERT … ON CONFLICT`` statement (PostgreSQL and SQLite), never a read
followed by an unguarded write. It is the only store that supports *atomic
mode*, where the record commits in the same transaction as the view's writes.

With ``RESPONSE_CACHE`` set to a cache alias (Redis recommended), completed
responses are read from that cache first, and written to it by the first replay
that reads them from the database: every later replay costs no SQL, and a first
request pays no cache write.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, ClassVar

from django.core.cache import BaseCache, caches
from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.outages import bursts, guard
from idempotency.stores import record_digest
from idempotency.stores.base import BaseStore, Claim, ClaimStatus, StoredResponse, new_fence

_COLUMNS = (
    "scope",
    "key",
    "fingerprint",
    "state",
    "fence",
    "lease_expires_at",
    "method",
    "route",
    "status_code",
    "response_headers",
    "response_body",
    "recovery_point",
    "recovery_data",
    "created_at",
    "completed_at",
    "expires_at",
)
_LOOKUP_FIELDS = (
    "fingerprint",
    "state",
    "lease_expires_at",
    "status_code",
    "response_headers",
    "response_body",
    "recovery_point",
    "recovery_data",
    "expires_at",
)


def _datetime(connection: BaseDatabaseWrapper, value: Any) -> datetime | None:
    """A datetime column as the ORM would return it (aware; SQLite hands back naive or text)."""
    if value is None:
        return None
    convert = getattr(connection.ops, "convert_datetimefield_value", None)
    if convert is not None:
        converted: datetime | None = convert(value, None, connection)
        return converted
    if not isinstance(value, datetime):  # pragma: no cover - no such backend in Django
        return parse_datetime(str(value))
    return value


def _json(value: Any) -> Any:
    """A JSON column as the ORM would return it (Django loads jsonb as text)."""
    return json.loads(value) if isinstance(value, str) else value


class _Clock:
    """Where a statement's "now" comes from.

    On PostgreSQL it is the database server's clock (``statement_timestamp()``), so
    every application server judges leases and expiry by one clock and one whose clock
    runs ahead can never take over a live lease. SQLite runs inside the application's
    process, so its clock is the application's.
    """

    SERVER_NOW = "statement_timestamp()"

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.server = connection.vendor == "postgresql"
        self._adapt = connection.ops.adapt_datetimefield_value
        self._now = timezone.now()

    @classmethod
    def now_sql(cls, connection: BaseDatabaseWrapper) -> str:
        return cls.SERVER_NOW if connection.vendor == "postgresql" else "%s"

    @classmethod
    def later_sql(cls, connection: BaseDatabaseWrapper) -> str:
        """SQL of "now plus a parameter's seconds"."""
        if connection.vendor == "postgresql":
            return f"({cls.SERVER_NOW} + %s * interval '1 second')"
        return "%s"

    def now(self) -> list[Any]:
        """Parameters of one :meth:`now_sql`."""
        return [] if self.server else [self._adapt(self._now)]

    def later(self, seconds: float) -> list[Any]:
        """Parameters of one :meth:`later_sql`."""
        if self.server:
            return [float(seconds)]
        return [self._adapt(self._now + timedelta(seconds=seconds))]


class DatabaseStore(BaseStore):
    supports_atomic: ClassVar[bool] = True
    lookup_before_claim: ClassVar[bool] = True

    def __init__(self, using: str | None = None, *, response_cache: str | None = None) -> None:
        """``using``: database alias (default ``DATABASE_ALIAS``); ``response_cache``: cache
        alias of this store's response cache (default ``RESPONSE_CACHE``), so one view can
        cache its replays while the others do not: ``@idempotent(store=DatabaseStore(
        response_cache="redis"))``."""
        self._using = using
        self._response_cache = response_cache
        # SQL text per (database alias, vendor, statement): built once, not on every request
        self._statements: dict[tuple[str, str, str], str] = {}

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

    @property
    def response_cache(self) -> BaseCache | None:
        alias = self._response_cache or idempotency_settings.RESPONSE_CACHE
        return caches[alias] if alias else None

    def _cache_key(self, scope: str, key: str) -> str:
        return f"{idempotency_settings.KEY_PREFIX}:resp:{record_digest(scope, key)}"

    def atomic(self) -> Any:
        """The transaction atomic-mode views run in (the record commits with their writes)."""
        return transaction.atomic(using=self.using)

    def _sql(self, connection: BaseDatabaseWrapper, name: str) -> str:
        """The text of statement ``name`` on ``connection``, built on first use."""
        cache_key = (connection.alias, connection.vendor, name)
        try:
            return self._statements[cache_key]
        except KeyError:
            pass
        if name == "lookup":
            sql = self._lookup_sql(connection)
        elif name == "complete":
            sql = self._complete_sql(connection)
        else:
            sql = self._upsert_sql(connection, takeover=name == "claim")
        self._statements[cache_key] = sql
        return sql

    def _lookup_sql(self, connection: BaseDatabaseWrapper) -> str:
        # Equality on the unique (scope, key) index only; expiry is checked in Python. A
        # range condition on expires_at would make PostgreSQL's planner probe the end of
        # the expires_at index for its estimate, and right after a purge that end is a
        # long run of dead entries: planning alone took 20 times the query (0.5 ms).
        # On PostgreSQL the server's clock comes back with the row, to judge it by.
        qn = connection.ops.quote_name
        columns = [qn(c) for c in _LOOKUP_FIELDS]
        if connection.vendor == "postgresql":
            columns.append(_Clock.SERVER_NOW)
        return (
            f"SELECT {', '.join(columns)} "
            f"FROM {qn(self.model._meta.db_table)} "
            f"WHERE {qn('scope')} = %s AND {qn('key')} = %s"
        )

    def _complete_sql(self, connection: BaseDatabaseWrapper) -> str:
        qn = connection.ops.quote_name
        return (
            f"UPDATE {qn(self.model._meta.db_table)} SET {qn('state')} = 'completed', "
            f"{qn('status_code')} = %s, {qn('response_headers')} = %s, "
            f"{qn('response_body')} = %s, {qn('completed_at')} = {_Clock.now_sql(connection)}, "
            f"{qn('lease_expires_at')} = NULL, {qn('expires_at')} = {_Clock.later_sql(connection)} "
            f"WHERE {qn('scope')} = %s AND {qn('key')} = %s AND {qn('fence')} = %s "
            f"AND {qn('state')} = 'in_progress'"
        )

    def _upsert_sql(self, connection: BaseDatabaseWrapper, *, takeover: bool) -> str:
        """``INSERT … ON CONFLICT``: a new record, replacing only an expired one (or, with
        ``takeover``, an in-progress one of the same request whose lease ran out).

        Parameters: those of :meth:`_values`, then those of one :meth:`_Clock.now` per
        "now" of the conflict and RETURNING clauses: six in a claim, two in an insert."""
        qn = connection.ops.quote_name
        now = _Clock.now_sql(connection)
        table = qn(self.model._meta.db_table)
        columns = ", ".join(qn(c) for c in _COLUMNS)
        placeholders = ", ".join(self._placeholders(connection, claim=takeover))
        assignments = ", ".join(f"{qn(c)} = excluded.{qn(c)}" for c in _COLUMNS[2:])
        condition = f"{table}.{qn('expires_at')} <= {now}"
        if takeover:
            condition += (
                f" OR ({table}.{qn('state')} = 'in_progress'"
                f" AND {table}.{qn('lease_expires_at')} <= {now}"
                f" AND {table}.{qn('fingerprint')} = excluded.{qn('fingerprint')})"
            )
            # a takeover keeps the recovery point the previous owner reached, and the
            # record's created_at (so the new owner can tell it took over)
            keep = (
                f"CASE WHEN {table}.{qn('expires_at')} <= {now} THEN excluded.{{c}}"
                f" ELSE {table}.{{c}} END"
            )
            assignments = ", ".join(
                f"{qn(c)} = " + keep.format(c=qn(c))
                if c in ("recovery_point", "recovery_data", "created_at")
                else f"{qn(c)} = excluded.{qn(c)}"
                for c in _COLUMNS[2:]
            )
        return (
            f"INSERT INTO {table} ({columns}) VALUES ({placeholders}) "
            f"ON CONFLICT ({qn('scope')}, {qn('key')}) DO UPDATE SET {assignments} "
            f"WHERE {condition} "
            f"RETURNING {qn('recovery_point')}, {qn('recovery_data')}, {qn('created_at')}, {now}"
        )

    @staticmethod
    def _placeholders(connection: BaseDatabaseWrapper, *, claim: bool) -> list[str]:
        """The VALUES of an upsert, column by column: a claim (in progress, with a lease)
        or a completed record (atomic mode's optimistic insert)."""
        now, later = _Clock.now_sql(connection), _Clock.later_sql(connection)
        timed = {
            "lease_expires_at": later if claim else "NULL",
            "created_at": now,
            "completed_at": "NULL" if claim else now,
            "expires_at": later,
        }
        return [timed.get(column, "%s") for column in _COLUMNS]

    @staticmethod
    def _values(
        clock: _Clock,
        scope: str,
        key: str,
        *,
        fingerprint: str,
        fence: int,
        lease: float | None,
        method: str,
        route: str,
        response: StoredResponse | None,
        ttl: float,
    ) -> list[Any]:
        """Parameters of the VALUES of :meth:`_placeholders`: a claim when ``lease`` is
        given, else a completed record holding ``response``."""
        return [
            scope,
            key,
            fingerprint,
            "in_progress" if lease is not None else "completed",
            fence,
            *(clock.later(lease) if lease is not None else []),
            method[:10],
            route[:255],
            response.status if response else None,
            response.headers_json() if response else "[]",
            response.body if response else None,
            "",
            None,
            *clock.now(),
            *(clock.now() if lease is None else []),
            *clock.later(ttl),
        ]

    # -- the contract --------------------------------------------------------------------

    @guard("database")
    def lookup(self, scope: str, key: str, *, fingerprint: str) -> Claim | None:
        cache = self.response_cache
        cached = self._cached_response(scope, key, fingerprint) if cache is not None else None
        if cached is not None:
            return cached
        connection = connections[self.using]
        # one SELECT through the unique (scope, key) index; plain SQL, because building it
        # with the ORM cost more than running it
        with connection.cursor() as cursor:
            cursor.execute(self._sql(connection, "lookup"), [scope, key])
            found = cursor.fetchone()
        if found is None:
            return None
        (fp, state, lease_expires_at, status, headers, body, point, data, expires) = found[:9]
        # the database server's clock where there is one (PostgreSQL), else ours
        now = _datetime(connection, found[9]) if len(found) > 9 else None
        now = now or timezone.now()
        expires_at = _datetime(connection, expires)
        if expires_at is None or expires_at <= now:
            return None  # expired: absent, even before it is purged
        if fp != fingerprint:
            return Claim(ClaimStatus.MISMATCH)
        if state == "completed":
            response = StoredResponse.from_parts(status, headers, body)
            if cache is not None:
                remaining = (expires_at - now).total_seconds()
                self._cache_response(scope, key, fingerprint, response, remaining)
            return Claim(ClaimStatus.COMPLETED, response=response)
        lease_expires_at = _datetime(connection, lease_expires_at)
        data = _json(data)
        if lease_expires_at is not None and lease_expires_at <= now:
            # an abandoned lease: the next claim takes it over
            return Claim(ClaimStatus.IN_PROGRESS, recovery_point=point, recovery_data=data)
        retry = (lease_expires_at - now).total_seconds() if lease_expires_at else 1.0
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

    @guard("database")
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
        sql = self._sql(connection, "claim")
        for _attempt in range(5):
            clock = _Clock(connection)
            fence = new_fence()
            params = self._values(
                clock,
                scope,
                key,
                fingerprint=fingerprint,
                fence=fence,
                lease=lease,
                method=method,
                route=route,
                response=None,
                ttl=ttl,
            )
            with connection.cursor() as cursor:
                cursor.execute(sql, [*params, *clock.now() * 6])
                returned = cursor.fetchone()
            if returned is not None:
                point, data, created, now = returned
                data = _json(data)
                return Claim(
                    ClaimStatus.CLAIMED,
                    fence=fence,
                    recovery_point=point or "",
                    recovery_data=data,
                    # a takeover keeps the first owner's created_at; a new record has now
                    taken_over=_datetime(connection, created) != _datetime(connection, now),
                )
            existing = self.lookup(scope, key, fingerprint=fingerprint)
            if existing is not None:
                return existing
            # released between our insert and our read: try again
        return Claim(ClaimStatus.IN_PROGRESS, retry_after=1.0)

    @guard("database")
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
        clock = _Clock(connection)
        params = self._values(
            clock,
            scope,
            key,
            fingerprint=fingerprint,
            fence=0,
            lease=None,
            method=method,
            route=route,
            response=response,
            ttl=ttl,
        )
        with connection.cursor() as cursor:
            cursor.execute(self._sql(connection, "insert"), [*params, *clock.now() * 2])
            inserted = cursor.fetchone() is not None
        return inserted

    @guard("database")
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
        clock = _Clock(connection)
        with connection.cursor() as cursor:
            cursor.execute(
                self._sql(connection, "complete"),
                [
                    response.status,
                    response.headers_json(),
                    response.body,
                    *clock.now(),
                    *clock.later(ttl),
                    scope,
                    key,
                    fence,
                ],
            )
            updated = cursor.rowcount
        return bool(updated)

    def _now_value(self) -> Any:
        """ "Now" for an ORM update: the database server's clock on PostgreSQL."""
        if connections[self.using].vendor == "postgresql":
            return Now()
        return timezone.now()

    @guard("database")
    def release(self, scope: str, key: str, *, fence: int) -> bool:
        records = self._records().filter(scope=scope, key=key, fence=fence, state="in_progress")
        deleted, _ = records.filter(recovery_point="").delete()
        if deleted:
            return True
        # a recovery point was recorded: keep it, end the lease so a retry resumes at once
        return bool(records.update(lease_expires_at=self._now_value()))

    @guard("database")
    def save_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        return bool(
            self._records()
            .filter(scope=scope, key=key, fence=fence, state="in_progress")
            .update(recovery_point=name, recovery_data=data)
        )

    @guard("database")
    def delete(self, scope: str, key: str) -> bool:
        deleted, _ = self._records().filter(scope=scope, key=key).delete()
        self.forget_cached(scope, key)
        return bool(deleted)

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
            return Claim(ClaimStatus.MISMATCH)
        return Claim(
            ClaimStatus.COMPLETED,
            response=StoredResponse(cached["status"], cached["headers"], cached["body"]),
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


def _cache_failed(store: DatabaseStore, operation: str, error: BaseException) -> None:
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
