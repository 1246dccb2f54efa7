"""Growth, measured in-process on PostgreSQL: claim latency against a small and a large
table, and the purge of a large table of expired records.

Runs in the orchestrator (``bench.settings``, Django set up) once the servers are
stopped. Records are bulk-inserted with one ``INSERT … SELECT generate_series`` per
chunk, then ``VACUUM ANALYZE``d, as a long-lived table would be.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from idempotency.stores.base import StoredResponse
from idempotency.stores.database import DatabaseStore, purge_expired_records

SEED_CHUNK = 250_000
RESPONSE = StoredResponse(
    201, [("Content-Type", "application/json")], b'{"id": 1, "amount": 1, "memo": "bench"}'
)
FINGERPRINT = "f" * 64


@dataclass(frozen=True)
class Claims:
    """Median and p99 latency (ms) of first requests against ``records`` existing records."""

    records: int
    atomic_ms: float
    atomic_p99_ms: float
    lease_ms: float
    lease_p99_ms: float


@dataclass(frozen=True)
class Purge:
    deleted: int
    batches: int
    seconds: float
    longest_batch_seconds: float

    @property
    def rows_per_second(self) -> float:
        return self.deleted / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class Growth:
    small: Claims
    large: Claims
    purge: Purge
    seed_seconds: float
    #: right after the purge: the table is empty but its dead rows are not vacuumed yet
    after_purge: Claims


def _table() -> str:
    from idempotency.models import IdempotencyRecord

    return str(IdempotencyRecord._meta.db_table)


def _seed(start: int, stop: int) -> None:
    """Records ``start`` … ``stop - 1``: completed, live for a day, over 5,000 scopes."""
    sql = f"""
        INSERT INTO {_table()} (
            scope, key, fingerprint, state, fence, lease_expires_at, method, route,
            status_code, response_headers, response_body, recovery_point, recovery_data,
            created_at, completed_at, expires_at)
        SELECT 'user:' || (i %% 5000), 'seed-' || md5(i::text), md5('fp' || i::text),
            'completed', 0, NULL, 'POST', '/bench/db-atomic/', 201,
            '[["Content-Type", "application/json"]]'::jsonb,
            convert_to('{{"id": ' || i || ', "amount": 1, "memo": "bench"}}', 'UTF8'),
            '', NULL, now() - interval '1 hour', now() - interval '1 hour',
            now() + interval '1 day' + (i %% 3600) * interval '1 second'
        FROM generate_series(%s, %s) AS i
    """
    with connection.cursor() as cursor:
        for begin in range(start, stop, SEED_CHUNK):
            cursor.execute(sql, [begin, min(stop, begin + SEED_CHUNK) - 1])
        cursor.execute(f"VACUUM ANALYZE {_table()}")


def _timed(samples: int, steps: dict[str, Callable[[str], None]]) -> dict[str, tuple[float, float]]:
    """Median and p99 ms of each step, the steps alternating sample by sample so that both
    see the same machine; a long warm-up first brings the index pages into the caches."""
    for _ in range(max(50, samples // 2)):
        for step in steps.values():
            step(uuid.uuid4().hex)
    timings: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(samples):
        for name, step in steps.items():
            key = uuid.uuid4().hex
            started = time.perf_counter()
            step(key)
            timings[name].append(time.perf_counter() - started)
    result = {}
    for name, values in timings.items():
        values.sort()
        p99 = values[max(0, int(len(values) * 0.99) - 1)]
        result[name] = (statistics.median(values) * 1000, p99 * 1000)
    return result


def _claims(records: int, samples: int) -> Claims:
    store = DatabaseStore()
    scope = "user:growth"

    def atomic_first(key: str) -> None:
        # atomic mode's first request, less the view: look up, then insert in a transaction
        assert store.lookup(scope, key, fingerprint=FINGERPRINT) is None
        with store.atomic():
            assert store.insert_completed(
                scope,
                key,
                fingerprint=FINGERPRINT,
                response=RESPONSE,
                ttl=86400,
                method="POST",
                route="/bench/db-atomic/",
            )

    def lease_claim(key: str) -> None:
        claim = store.claim(
            scope,
            key,
            fingerprint=FINGERPRINT,
            lease=60,
            ttl=86400,
            method="POST",
            route="/bench/db-lease/",
        )
        assert claim.owned

    timed = _timed(samples, {"atomic": atomic_first, "lease": lease_claim})
    atomic, lease = timed["atomic"], timed["lease"]
    return Claims(records, atomic[0], atomic[1], lease[0], lease[1])


def measure(*, small: int, large: int, samples: int, log: Callable[[str], None]) -> Growth:
    """Claims at ``small`` and ``large`` existing records, then purge them all as expired."""
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {_table()}")
    started = time.perf_counter()
    _seed(0, small)
    log(f"growth: {small:,} records seeded; timing {samples} first requests")
    small_claims = _claims(small, samples)
    seed_started = time.perf_counter()
    _seed(small, large)
    seed_seconds = time.perf_counter() - seed_started + (seed_started - started)
    log(f"growth: {large:,} records seeded; timing {samples} first requests")
    large_claims = _claims(large, samples)
    # Every record expires within a day and two hours: a cut-off two days ahead makes all
    # of them (the seeded and the measured) expired, as they will be in two days.
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {_table()}")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {_table()}")
        row = cursor.fetchone()
    log(f"growth: purging {row[0] if row else 0:,} expired records")
    result = purge_expired_records(now=timezone.now() + timedelta(days=2))
    purge = Purge(result.deleted, result.batches, result.seconds, result.longest_batch_seconds)
    log(f"growth: timing {samples} first requests right after the purge")
    after_purge = _claims(0, samples)
    return Growth(small_claims, large_claims, purge, seed_seconds, after_purge)
