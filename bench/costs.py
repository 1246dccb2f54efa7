"""Requests in-process, through Django's WSGI handler (no HTTP server, no wrk), and what
one of them costs.

:func:`setup`, :func:`caller` and :func:`keys` make the requests (as gunicorn hands them
to Django) for this run's costs and for :mod:`bench.instructions`. :func:`measure` times
the variants one request at a time, alternating in blocks of 20, next to the price of
one PostgreSQL and one Redis round trip: less noisy than the load runs on a shared
machine, and it shows what the layer adds as time rather than as a throughput ratio.
:func:`count_round_trips` counts what one request sends to the services, and
:func:`probes` are single round trips, the prices they are compared with.
"""

from __future__ import annotations

import io
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BODY = b'{"amount": 1, "memo": "bench"}'


def setup(settings: str = "bench.settings") -> tuple[Any, str]:
    """Django with ``settings`` (ours, or a peer's ``bench.settings_peer_*``); the WSGI
    application and the load user's token."""
    os.environ["DJANGO_SETTINGS_MODULE"] = settings
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.handlers.wsgi import WSGIHandler
    from rest_framework.authtoken.models import Token

    from bench.benchapp.models import Account

    user, _ = get_user_model().objects.get_or_create(username="bench-profile")
    Account.objects.get_or_create(user=user)
    token, _ = Token.objects.get_or_create(user=user)
    return WSGIHandler(), token.key


def caller(app: Any, token: str, path: str) -> Callable[[str], int]:
    """``call(key) -> status``: one POST through the WSGI handler, as gunicorn makes it."""

    def call(key: str) -> int:
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": path,
            "SCRIPT_NAME": "",
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(BODY)),
            "HTTP_HOST": "127.0.0.1",
            "HTTP_AUTHORIZATION": f"Token {token}",
            "HTTP_IDEMPOTENCY_KEY": key,
            "wsgi.input": io.BytesIO(BODY),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            "wsgi.version": (1, 0),
        }
        status: list[str] = []
        body = app(environ, lambda s, h, exc_info=None: status.append(s))
        b"".join(body)
        body.close()
        return int(status[0].split()[0])

    return call


def keys(path_kind: str) -> Callable[[], str]:
    fixed = f"replay-{uuid.uuid4().hex}"
    if path_kind == "replay":
        return lambda: fixed
    return lambda: uuid.uuid4().hex


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


def probes() -> dict[str, Callable[[], object]]:
    from django.core.cache import cache
    from django.db import connection, transaction
    from django_redis import get_redis_connection

    from idempotency.stores.redis import RedisStore

    client = get_redis_connection("default")
    script = client.register_script("return 1")
    script()
    # RedisStore's client: redis-py's, built from the same cache's settings
    store_script = RedisStore(cache="default").client.register_script("return 1")
    store_script()

    def select_one() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()

    def transaction_and_select() -> None:
        with transaction.atomic():
            select_one()

    return {
        "SELECT 1": select_one,
        "transaction around SELECT 1": transaction_and_select,
        "django-redis GET (miss)": lambda: cache.get(f"bench-missing-{uuid.uuid4().hex}"),
        "redis-py EVALSHA": script,
        "redis-py GET": lambda: client.get("bench-missing"),
        # RedisStore's: the same script through the store's own redis-py client
        "RedisStore EVALSHA": store_script,
    }
