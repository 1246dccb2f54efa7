"""Where the time of one request goes, measured in-process (no HTTP server, no wrk).

The same views run through Django's WSGI handler one request at a time, the variants
alternating in blocks of 20, next to the price of one PostgreSQL and one Redis round
trip. Less noisy than the load runs on a shared machine, and it shows what the layer
adds as time rather than as a throughput ratio.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from bench.profile import caller, keys

CASES: tuple[tuple[str, str], ...] = (
    ("bare", "first"),
    ("db-atomic", "first"),
    ("db-atomic-flat", "first"),
    ("db-optimistic", "first"),
    ("db-lease", "first"),
    ("redis", "first"),
    ("db-redis-cache", "first"),
    ("noop", "replay"),
    ("db-atomic", "replay"),
    ("db-optimistic", "replay"),
    ("db-lease", "replay"),
    ("redis", "replay"),
    ("db-redis-cache", "replay"),
)


@dataclass(frozen=True)
class RoundTrips:
    """What one request sends to the services, counted where it is sent."""

    sql: int  # statements through Django's cursors (SAVEPOINT/RELEASE included)
    transactions: int  # commits and rollbacks: each adds a BEGIN and an end, 2 round trips
    redis: int  # commands sent to Redis

    @property
    def total(self) -> int:
        return self.sql + 2 * self.transactions + self.redis


@dataclass(frozen=True)
class Costs:
    #: median µs of one request per (variant, path)
    requests: dict[tuple[str, str], float]
    #: median CPU µs of the request thread per request (user + kernel)
    cpu: dict[tuple[str, str], float]
    #: round trips of one request per (variant, path)
    round_trips: dict[tuple[str, str], RoundTrips]
    #: median µs of ``SELECT 1`` through Django's cursor
    postgres_round_trip: float
    #: median µs of a ``cache.get`` miss on the django-redis cache
    redis_round_trip: float


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6 if samples else float("nan")


def measure(token: str, *, blocks: int, per_block: int = 20) -> Costs:
    from django.core.cache import cache
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connection

    app = WSGIHandler()
    calls: dict[tuple[str, str], tuple[Callable[[str], int], Callable[[], str]]] = {
        case: (caller(app, token, f"/bench/{case[0]}/"), keys(case[1])) for case in CASES
    }

    def select_one(_: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return 200

    def cache_miss(_: str) -> int:
        cache.get(f"bench-missing-{uuid.uuid4().hex}")
        return 200

    probes: dict[str, tuple[Callable[[str], int], Callable[[], str]]] = {
        "postgres": (select_one, lambda: ""),
        "redis": (cache_miss, lambda: ""),
    }
    everything = {**{f"{v}:{p}": c for (v, p), c in calls.items()}, **probes}
    samples: dict[str, list[float]] = {name: [] for name in everything}
    cpu: dict[str, list[float]] = {name: [] for name in everything}
    for call, next_key in everything.values():  # warm up; prime the replay keys
        for _ in range(30):
            call(next_key())
    for _ in range(blocks):
        for name, (call, next_key) in everything.items():
            block_keys = [next_key() for _ in range(per_block)]
            cpu_started = time.thread_time()
            for key in block_keys:
                started = time.perf_counter()
                call(key)
                samples[name].append(time.perf_counter() - started)
            cpu[name].append((time.thread_time() - cpu_started) / per_block)
    return Costs(
        requests={case: _median_us(samples[f"{case[0]}:{case[1]}"]) for case in CASES},
        cpu={case: _median_us(cpu[f"{case[0]}:{case[1]}"]) for case in CASES},
        round_trips={case: count_round_trips(*calls[case]) for case in CASES},
        postgres_round_trip=_median_us(samples["postgres"]),
        redis_round_trip=_median_us(samples["redis"]),
    )


def count_round_trips(call: Callable[[str], int], next_key: Callable[[], str]) -> RoundTrips:
    """Send one request and count its SQL statements, transactions and Redis commands."""
    import redis
    from django.db import connection

    counts = {"sql": 0, "transactions": 0, "redis": 0}

    def sql(execute: Callable[..., object], *args: object) -> object:
        counts["sql"] += 1
        return execute(*args)

    # every command and pipeline is sent here, packed by redis-py (RedisStore's too)
    send = redis.connection.Connection.send_packed_command
    commit, rollback = connection._commit, connection._rollback

    def counting_send(self: object, *args: object, **kwargs: object) -> None:
        counts["redis"] += 1
        send(self, *args, **kwargs)  # type: ignore[arg-type]

    def ended(end: Callable[[], None]) -> Callable[[], None]:
        def wrapper() -> None:
            counts["transactions"] += 1
            end()

        return wrapper

    redis.connection.Connection.send_packed_command = counting_send  # type: ignore[method-assign]
    connection._commit = ended(commit)  # type: ignore[method-assign]
    connection._rollback = ended(rollback)  # type: ignore[method-assign]
    try:
        with connection.execute_wrapper(sql):
            call(next_key())
    finally:
        redis.connection.Connection.send_packed_command = send  # type: ignore[method-assign]
        del connection._commit, connection._rollback
    return RoundTrips(**counts)
