"""The record quota's counter in the database (``MAX_NEW_RECORDS``): one row of
``RecordQuota`` per scope and fixed window, counted atomically.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from django.db import IntegrityError, connections, transaction
from django.db.models import F

from idempotency.stores.records import quota_window


def count_new_record(using: str, scope: str, *, window: float) -> tuple[int, float]:
    """One upsert of the (scope, window) row of ``RecordQuota`` on PostgreSQL and
    SQLite (``INSERT … ON CONFLICT DO UPDATE … RETURNING``: atomic, the row locked
    for that statement only in autocommit); elsewhere an update-or-insert in one
    short transaction."""
    from idempotency.models import RecordQuota

    start, left = quota_window(window, time.time())
    connection = connections[using]
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
    rows = RecordQuota.objects.using(using).filter(scope=scope, window=start)
    with transaction.atomic(using=using):
        if not rows.update(count=F("count") + 1):
            try:
                with transaction.atomic(using=using):
                    rows.create(scope=scope, window=start, count=1, expires_at=expires)
                return 1, left
            except IntegrityError:  # a concurrent first one: count on it
                rows.update(count=F("count") + 1)
        return int(rows.values_list("count", flat=True).get()), left
