"""Idempotency records made directly in the table, for the admin and purge tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from idempotency.models import IdempotencyRecord, RecordState
from idempotency.stores import records
from idempotency.stores.records import StoredResponse

_serial = itertools.count(1)

MakeRecord = Callable[..., IdempotencyRecord]


def record(
    *,
    key: str | None = None,
    scope: str = "user:1",
    expired: bool = False,
    body: bytes | None = b'{"id": 1, "status": "created"}',
    headers: list[list[str]] | None = None,
    created_at: datetime | None = None,
    **fields: Any,
) -> IdempotencyRecord:
    """An unsaved completed record, live for a day or expired an hour ago."""
    now = timezone.now()
    number = next(_serial)
    values: dict[str, Any] = {
        "scope": scope,
        "key": key or f"key-{number}",
        "fingerprint": "f" * 64,
        "state": RecordState.COMPLETED,
        "method": "POST",
        "route": "/api/orders/",
        "status_code": 201,
        "response_headers": (
            headers if headers is not None else [["Content-Type", "application/json"]]
        ),
        "response_body": body,
        "created_at": created_at or now - timedelta(hours=2),
        "completed_at": now - timedelta(hours=2),
        "expires_at": now - timedelta(hours=1) if expired else now + timedelta(days=1),
    }
    values.update(fields)
    if values["state"] == RecordState.COMPLETED and "mac" not in fields:
        values["mac"] = signed(values)
    return IdempotencyRecord(**values)


def signed(values: dict[str, Any]) -> str:
    """The tag the store would have given a completed record of these column values
    (:mod:`idempotency.stores.records`), expiring when its ``expires_at`` says."""
    stored = StoredResponse.from_parts(
        values["status_code"], values["response_headers"], values["response_body"]
    )
    return records.tag_for(
        values["scope"],
        values["key"],
        fingerprint=values["fingerprint"],
        fence=values.get("fence", 0),
        stored=stored,
        expires_ms=int(values["expires_at"].timestamp() * 1000),
    )


def bulk(count: int, *, expired: bool, prefix: str = "k") -> list[IdempotencyRecord]:
    """Save ``count`` records at once."""
    return IdempotencyRecord.objects.bulk_create(
        [record(key=f"{prefix}-{i}", expired=expired) for i in range(count)]
    )
