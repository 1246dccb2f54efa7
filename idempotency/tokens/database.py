"""Submit tokens as :class:`~idempotency.models.SubmitToken` rows (``DatabaseTokens``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar

from django.apps import apps
from django.db.models import Q
from django.utils import timezone

from idempotency.conf import Setting
from idempotency.tokens.base import INVALID, OK, TOMBSTONE_SECONDS, USED, TokenBackend
from idempotency.utils.outages import outage_raises_unavailable


class DatabaseTokens(TokenBackend):
    """Tokens as :class:`~idempotency.models.SubmitToken` rows of its ``database`` (the
    default backend)."""

    #: ``OPTIONS`` of database tokens (:mod:`idempotency.utils.backends`).
    options: ClassVar[Mapping[str, Setting]] = {
        "database": Setting(
            "default", "Database alias whose SubmitToken table keeps them.", "database"
        ),
    }

    def __init__(self, *, database: str = "default") -> None:
        self.using = database

    def _tokens(self) -> Any:
        return apps.get_model("idempotency", "SubmitToken").objects.using(self.using)

    @outage_raises_unavailable("database", keyed=False)
    def issue(self, token_hash: str, scope: str, purpose: str, ttl: float) -> datetime:
        now = timezone.now()
        expires_at = now + timedelta(seconds=ttl)
        self._tokens().create(
            token_hash=token_hash,
            scope=scope,
            purpose=purpose,
            created_at=now,
            expires_at=expires_at,
        )
        return expires_at

    @outage_raises_unavailable("database", keyed=False)
    def consume(self, token_hash: str, scope: str, purpose: str) -> str:
        now = timezone.now()
        bound = self._tokens().filter(token_hash=token_hash, scope=scope, purpose=purpose)
        # the one atomic step: of concurrent consumers, one UPDATE matches the row
        if bound.filter(consumed_at__isnull=True, expires_at__gt=now).update(consumed_at=now):
            return OK
        tombstone = bound.filter(consumed_at__isnull=False).filter(
            Q(expires_at__gt=now) | Q(consumed_at__gt=now - timedelta(seconds=TOMBSTONE_SECONDS))
        )
        return USED if tombstone.exists() else INVALID

    def purge(self, *, now: datetime, batch_size: int) -> int:
        cutoff = now - timedelta(seconds=TOMBSTONE_SECONDS)
        expired = (
            self._tokens()
            .filter(expires_at__lte=cutoff)
            .filter(Q(consumed_at__isnull=True) | Q(consumed_at__lte=cutoff))
        )
        deleted = 0
        while True:
            ids = list(expired.values_list("pk", flat=True)[:batch_size])
            if not ids:
                return deleted
            count, _ = self._tokens().filter(pk__in=ids).delete()
            deleted += count
