"""Delete expired idempotency records in bounded batches.

An expired record is already treated as absent by every store, so purging only
reclaims space; it never changes behaviour. Only :class:`DatabaseStore` needs
it: Redis and cache records expire by themselves.

Each batch is its own short transaction over at most ``batch_size`` rows, found
through the ``expires_at`` index, so a purge of millions of rows never holds
locks for long and can be stopped (``max_batches``) and resumed at any time.
On PostgreSQL a batch is one ``DELETE … WHERE id IN (SELECT … FOR UPDATE SKIP
LOCKED)`` statement, so concurrent purges share the work instead of queueing; on
MySQL and MariaDB, which refuse a subquery on the table being deleted from, one
``DELETE … ORDER BY expires_at LIMIT n`` under a named lock, so concurrent purges take
turns; elsewhere a batch selects the primary keys, then deletes them.

Expired records are never held in the response cache past their TTL, so there
is nothing else to invalidate.

Without a Celery beat or a cron job, :func:`purge_now_and_then` keeps the table
bounded on its own: every ``PURGE_EVERY``-th record a process completes, it deletes
one batch of at most ``PURGE_EVERY_BATCH`` expired records, after the commit of the
transaction that completed it (on PostgreSQL a ``SKIP LOCKED`` delete that waits for
no lock). A failure there is logged and never reaches the request.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.db import DatabaseError, OperationalError, connections, transaction
from django.utils import timezone

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.stores.base import configured_database
from idempotency.stores.sql import SERVER_CLOCK_VENDORS, as_datetime, now_sql
from idempotency.utils.outages import is_deadlock

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

__all__ = ["PurgeResult", "purge_expired_records", "purge_now_and_then"]

#: Attempts of a MySQL batch chosen as a deadlock's victim.
DEADLOCK_ATTEMPTS = 3

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


def _model() -> Any:
    return apps.get_model("idempotency", "IdempotencyRecord")


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
        expired = _model().objects.using(alias).filter(expires_at__lte=cutoff).count()
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
    signals.purged.send(sender=_model(), deleted=result.deleted, using=alias)
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
    if connection.vendor not in SERVER_CLOCK_VENDORS:
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {now_sql(connection)}")
        value = cursor.fetchone()[0]
    moment = as_datetime(connection, value)
    if moment is None:  # pragma: no cover - a server's clock is never NULL
        raise DatabaseError(f"The database {alias!r} answered NULL for the current time.")
    return moment


def _delete_batch(connection: BaseDatabaseWrapper, cutoff: datetime, size: int) -> int:
    """One batch on any database: select up to ``size`` primary keys, delete them."""
    records = _model().objects.using(connection.alias)
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
    meta = _model()._meta
    table, pk = qn(meta.db_table), qn(meta.pk.column)
    sql = (
        f"DELETE FROM {table} WHERE {pk} IN ("
        f"SELECT {pk} FROM {table} WHERE {qn('expires_at')} <= %s "
        f"ORDER BY {qn('expires_at')} LIMIT %s FOR UPDATE SKIP LOCKED)"
    )
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(sql, [cutoff, size])
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
    sql = (
        f"DELETE FROM {qn(_model()._meta.db_table)} WHERE {qn('expires_at')} <= %s "
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
                        cursor.execute(sql, [value, size])
                        return int(cursor.rowcount)
                except OperationalError as exc:
                    if not is_deadlock(exc) or attempt == DEADLOCK_ATTEMPTS:
                        raise
            return 0  # pragma: no cover - the loop returns or raises
        finally:
            cursor.execute("SELECT RELEASE_LOCK(%s)", [name.hexdigest()])
