"""Re-encrypt stored bodies under the newest key of ``BODY_ENCRYPTION_KEYS``.

After a new key is put first in ``BODY_ENCRYPTION_KEYS`` (the old ones still listed),
:func:`reencrypt_records` rewrites every live completed record's body under it
(``MultiFernet.rotate``), in bounded batches: then the old key can be removed. Each
rewrite is conditional on the record being the one read (its fencing token in the
database, its body in Redis), so a record replaced meanwhile is left to its new owner.

``plaintext=True`` also encrypts bodies stored before encryption was turned on (those
that do not have the codec's form at all); a body that has the form but decrypts
under no listed key is unreadable and left as it is (counted in ``unreadable``). Each
rewritten record gets its tag anew over the new body (its authenticated expiry kept,
:mod:`~idempotency.stores.records`), and only when its old tag verifies: a
forged record is left as it is (counted in ``forged``), never signed.

:class:`~idempotency.stores.database.DatabaseStore` (and its response cache, whose entries of
rewritten records are dropped) and :class:`~idempotency.stores.redis.RedisStore` are
supported. A :class:`~idempotency.stores.cache.CacheStore` cannot list its records through
Django's cache API: keep the old key listed until ``TTL`` has passed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from idempotency.codecs import RotatingCodec, UndecodableBody, body_codec
from idempotency.conf import idempotency_settings
from idempotency.stores.base import BaseStore, get_store
from idempotency.stores.database import DatabaseStore
from idempotency.stores.records import (
    StoredResponse,
    record_digest,
    resign,
)
from idempotency.stores.redis import RedisStore, as_text

__all__ = ["ReencryptionResult", "reencrypt_records"]

#: Rewrite a Redis record's body and tag only if they are still those that were read.
_SWAP_BODY = """
local r = redis.call('HMGET', KEYS[1], 'body', 'mac')
if r[1] == ARGV[1] and r[2] == ARGV[3] then
  redis.call('HSET', KEYS[1], 'body', ARGV[2], 'mac', ARGV[4])
  return 1
end
return 0
"""


@dataclass(frozen=True, slots=True)
class ReencryptionResult:
    """What one run did (for a dry run: would do)."""

    #: Bodies rewritten under the newest key, or that a dry run would rewrite.
    reencrypted: int
    #: Bodies left as they are, since they decrypt under no listed key.
    unreadable: int
    #: Records left as they are, since they fail their authentication
    #: (:mod:`~idempotency.stores.records`): a forged record is never signed anew.
    forged: int
    #: Batches read.
    batches: int
    #: Wall-clock seconds of the whole run.
    seconds: float


class _Rewriter:
    def __init__(self, codec: RotatingCodec, *, plaintext: bool) -> None:
        self.codec = codec
        self.plaintext = plaintext
        self.unreadable = 0
        self.forged = 0

    def rewrite(
        self, name: str, fingerprint: str, fence: Any, tag: Any, old: StoredResponse
    ) -> tuple[bytes, str] | None:
        """The body of the record filed under ``name`` re-encoded under the newest key,
        and the record's tag over it (its authenticated expiry kept), or None when the
        body is unreadable or the record fails its authentication."""
        body = old.body
        try:
            if self.plaintext and not self.codec.is_encoded(body):
                new = self.codec.encode(body)
            else:
                new = self.codec.rotate(body)
        except UndecodableBody:
            self.unreadable += 1
            return None
        tag = resign(
            name, tag=tag, fingerprint=fingerprint, fence=fence, old=old,
            new=old._replace(body=new),
        )  # fmt: skip
        if tag is None:
            self.forged += 1
            return None
        return new, tag


def reencrypt_records(
    *,
    store: str | BaseStore | None = None,
    batch_size: int | None = None,
    dry_run: bool = False,
    plaintext: bool = False,
) -> ReencryptionResult:
    """Rewrite the stored bodies of ``store`` (an alias of ``STORES``, default ``"default"``,
    or a store) under the newest key.

    :param batch_size: records read per batch (default ``PURGE_BATCH_SIZE``).
    :param dry_run: count, change nothing.
    :param plaintext: also encrypt bodies stored in clear (before encryption was on).
    :raises ValueError: for a store that cannot list its records, or a codec that has
        no keys to rotate (``BODY_CODEC`` is not a :class:`~idempotency.codecs.RotatingCodec`).
    """
    size = int(idempotency_settings.PURGE_BATCH_SIZE if batch_size is None else batch_size)
    if size < 1:
        raise ValueError(f"batch_size must be a positive integer, not {batch_size!r}")
    codec = body_codec()
    if not isinstance(codec, RotatingCodec):
        raise ValueError(
            f"BODY_CODEC {type(codec).__name__} has no keys to rotate; set it to "
            "idempotency.codecs.FernetCodec first"
        )
    resolved = get_store(store)
    rewriter = _Rewriter(codec, plaintext=plaintext)
    started = time.perf_counter()
    if isinstance(resolved, DatabaseStore):
        done, batches = _database(resolved, rewriter, size, dry_run)
    elif isinstance(resolved, RedisStore):
        done, batches = _redis(resolved, rewriter, size, dry_run)
    else:
        raise ValueError(
            f"{type(resolved).__name__} cannot list its records; keep the old key in "
            "BODY_ENCRYPTION_KEYS until TTL has passed"
        )
    return ReencryptionResult(
        reencrypted=done,
        unreadable=rewriter.unreadable,
        forged=rewriter.forged,
        batches=batches,
        seconds=time.perf_counter() - started,
    )


def _database(
    store: DatabaseStore, rewriter: _Rewriter, size: int, dry_run: bool
) -> tuple[int, int]:
    records = store.model.objects.using(store.using)
    live = records.filter(
        state="completed", response_body__isnull=False, expires_at__gt=timezone.now()
    )
    last = 0
    done = batches = 0
    while True:
        rows = list(
            live.filter(pk__gt=last)
            .order_by("pk")
            .values_list(
                "pk", "fence", "scope", "key", "fingerprint", "mac", "status_code",
                "response_headers", "response_body",
            )[:size]
        )  # fmt: skip
        if not rows:
            return done, batches
        batches += 1
        with transaction.atomic(using=store.using):
            for pk, fence, scope, key, fingerprint, tag, status, headers, body in rows:
                old = StoredResponse.from_parts(status, headers, body)
                name = record_digest(scope, key)
                rewritten = rewriter.rewrite(name, fingerprint, fence, tag, old)
                if rewritten is None:
                    continue
                if dry_run:
                    done += 1
                    continue
                # the fence and tag: a record claimed or completed anew since the read
                # belongs to its new owner
                changed = records.filter(pk=pk, fence=fence, mac=tag, state="completed").update(
                    response_body=rewritten[0], mac=rewritten[1]
                )
                if changed:
                    done += 1
                    store.forget_cached(scope, key)
        last = rows[-1][0]


def _redis(store: RedisStore, rewriter: _Rewriter, size: int, dry_run: bool) -> tuple[int, int]:
    client = store.client
    swap = client.register_script(_SWAP_BODY)
    pattern = f"{store.key_prefix}:{{*}}:rec"
    done = batches = 0
    names: list[Any] = []

    def flush() -> None:
        nonlocal done, batches
        batches += 1
        for name in names:
            fields = client.hmget(name, "state", "body", "fp", "fence", "mac", "status", "headers")
            state, body, fingerprint, fence, tag, status, headers = fields
            if state != b"c" or body is None:
                continue  # in progress, released or expired since the scan
            old = StoredResponse.from_parts(int(status), as_text(headers), body)
            digest = as_text(name).rpartition("{")[2].partition("}")[0]
            found = rewriter.rewrite(digest, as_text(fingerprint), as_text(fence), tag, old)
            if found is None:
                continue
            if dry_run or swap(keys=[name], args=[body, found[0], tag or b"", found[1]]):
                done += 1
        names.clear()

    for name in client.scan_iter(match=pattern, count=size):
        names.append(name)
        if len(names) >= size:
            flush()
    if names:
        flush()
    return done, batches
