"""A running owner's updates of its record in :class:`~idempotency.stores.DatabaseStore`:
release, keep-alive (``extend``) and recovery points, each fenced by the owner's token.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import DateTimeField, ExpressionWrapper, F
from django.db.models.functions import Greatest

from idempotency.core.outages import outage_raises_unavailable
from idempotency.exceptions import StoreUnavailable
from idempotency.stores.database_table import DatabaseTable
from idempotency.stores.deadlocks import busy


class DatabaseLeases(DatabaseTable):
    """Release, extend and recovery points of a claimed record."""

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
