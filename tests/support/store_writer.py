"""A store writer without the application's secret: reads a record's raw fields and
writes them back changed, or into another record, through each backend's own client
(the database table, Redis' hash commands, the cache), never through the store."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

from django.utils import timezone

from idempotency.stores.base import BaseStore
from idempotency.stores.cache import CacheStore, dump_record, load_record
from idempotency.stores.database import DatabaseStore
from idempotency.stores.redis import RedisStore

#: The record's fields as the tests name them, by store: (database, Redis, cache).
FIELDS = {
    "status": ("status_code", "status", "status"),
    "headers": ("response_headers", "headers", "headers"),
    "body": ("response_body", "body", "body"),
    "fingerprint": ("fingerprint", "fp", "fp"),
    "fence": ("fence", "fence", "fence"),
    "tag": ("mac", "mac", "mac"),
}


def _column(store: BaseStore, field: str) -> str:
    names = FIELDS[field]
    if isinstance(store, DatabaseStore):
        return names[0]
    return names[1] if isinstance(store, RedisStore) else names[2]


def read(store: BaseStore, scope: str, key: str) -> dict[str, Any]:
    """Every raw field of the record of ``(scope, key)``."""
    if isinstance(store, DatabaseStore):
        row = store.model.objects.filter(scope=scope, key=key).values().get()
        row.pop("id")
        row.pop("scope")
        row.pop("key")
        if row["response_body"] is not None:
            row["response_body"] = bytes(row["response_body"])
        return row
    if isinstance(store, RedisStore):
        raw = store.client.hgetall(store.record_key(scope, key))
        return {name.decode(): value for name, value in raw.items()}
    assert isinstance(store, CacheStore)
    return load_record(store.raw.get(store.record_key(scope, key)))


def write(store: BaseStore, scope: str, key: str, fields: dict[str, Any]) -> None:
    """Make ``fields`` the whole record of ``(scope, key)``, live for an hour."""
    if isinstance(store, DatabaseStore):
        store.model.objects.update_or_create(scope=scope, key=key, defaults=fields)
    elif isinstance(store, RedisStore):
        name = store.record_key(scope, key)
        store.client.delete(name)
        store.client.hset(name, mapping=fields)
        store.client.pexpire(name, 3_600_000)
    else:
        assert isinstance(store, CacheStore)
        store.raw.set(store.record_key(scope, key), dump_record(fields), 3600)


def field(store: BaseStore, scope: str, key: str, name: str) -> Any:
    """One field of the record (``FIELDS``' names), as the backend keeps it."""
    return read(store, scope, key).get(_column(store, name))


def change(store: BaseStore, scope: str, key: str, **changes: Any) -> None:
    """Write ``changes`` (``FIELDS``' names) into the record of ``(scope, key)``, each
    value in the form the backend keeps: headers as a list (JSON text in Redis), the
    rest as given."""
    record = read(store, scope, key)
    for name, value in changes.items():
        if name == "headers" and isinstance(store, RedisStore):
            value = json.dumps(value)
        record[_column(store, name)] = value
    write(store, scope, key, record)


def copy(store: BaseStore, source: tuple[str, str], target: tuple[str, str]) -> None:
    """Copy the whole record of ``source`` over the record of ``target``."""
    write(store, *target, read(store, *source))


def lengthen(store: BaseStore, scope: str, key: str, seconds: float) -> None:
    """Push the expiry the store itself keeps ``seconds`` further (the tag is left)."""
    if isinstance(store, DatabaseStore):
        store.model.objects.filter(scope=scope, key=key).update(
            expires_at=timezone.now() + timedelta(seconds=seconds)
        )
    elif isinstance(store, RedisStore):
        store.client.pexpire(store.record_key(scope, key), int(seconds * 1000))
    else:
        record = read(store, scope, key)
        record["expires"] = time.time() + seconds
        write(store, scope, key, record)
