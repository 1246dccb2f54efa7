"""Where the layer's cost goes, path by path: ``python -m bench.breakdown``.

Every path runs in-process through Django's WSGI handler, one request at a time, side
by side with its reference (``bare`` for a first request, ``noop`` for a replay, the
undecorated function for a function call), in interleaved blocks. For each path:

* **wall and CPU**: the median µs per request, wall clock and the request thread's CPU
  time (``time.thread_time``: user and kernel time of this thread only, so the other
  work on a shared machine moves it far less than the wall clock);
* **round trips**: SQL statements, transactions (a BEGIN and an end each) and Redis
  commands of one request, counted as they are sent, and their price measured here
  (``SELECT 1`` through Django's cursor, a django-redis ``GET`` miss, an ``EVALSHA``,
  an empty transaction), as wall time and as the driver's CPU per command;
* **the split** of the request thread's CPU time by what runs: a profiler hook
  (``sys.setprofile``, clock ``time.thread_time``) charges every interval to the
  innermost *kind* of code on the stack: SQL (Django's cursor and the driver),
  transactions, Redis (redis-py), the response cache's client (django-redis),
  signals (dispatch and receivers), logging, response capture/replay, encodings,
  fingerprint and key parsing, the layer's own code (``idempotency/``), and Django/DRF
  (request handling, the view, rendering, the ORM). The hook's own cost per event is
  measured (per Python and per C call) and taken off; the *added* split is the path's
  minus its reference's;
* optionally (``--cprofile DIR``) a ``cProfile.Profile(time.thread_time)`` listing per
  path, sorted by cumulative time, for reading the call tree.

``--markdown FILE`` writes the tables (``bench/RESULTS_BREAKDOWN.md`` by convention).
Uses the benchmark database and Redis (``bench/env.py``), migrated on the way.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.breakdown_data import Path_, Price
from bench.breakdown_report import markdown
from bench.costs import RoundTrips, count_round_trips
from bench.split import KINDS, Split, hook_cost_per_event

Call = Callable[[str], Any]
NextKey = Callable[[], str]

#: (variant, path, reference). Function cases use the ``fn-*`` names.
CASES: tuple[tuple[str, str, str], ...] = (
    ("bare", "first", "bare"),
    ("redis", "first", "bare"),
    ("db-atomic", "first", "bare"),
    ("db-lease", "first", "bare"),
    ("db-redis-cache", "first", "bare"),
    ("noop", "replay", "noop"),
    ("redis", "replay", "noop"),
    ("db-atomic", "replay", "noop"),
    ("db-lease", "replay", "noop"),
    ("db-redis-cache", "replay", "noop"),
    ("fn-plain", "call", "fn-plain"),
    ("fn-db", "first", "fn-plain"),
    ("fn-db", "replay", "fn-plain"),
    ("fn-redis", "replay", "fn-plain"),
)

# -- the paths ---------------------------------------------------------------------------


def function_calls() -> dict[str, Call]:
    """The function paths: the plain body, and under ``@idempotent_function``."""
    from idempotency import DatabaseStore, RedisStore, idempotent_function

    def settle(ref: str) -> dict[str, Any]:
        return {"ref": ref, "status": "settled", "amount": 1}

    on_db = idempotent_function(key="bench:{ref}", store=DatabaseStore(), mode="lease")(settle)
    on_redis = idempotent_function(key="bench:{ref}", store=RedisStore())(settle)
    return {"fn-plain": settle, "fn-db": on_db, "fn-redis": on_redis}


def build_calls(
    token: str, cases: tuple[tuple[str, str, str], ...]
) -> dict[tuple[str, str], tuple[Call, NextKey]]:
    from django.core.handlers.wsgi import WSGIHandler

    from bench.profile import caller, keys

    app = WSGIHandler()
    functions = function_calls()
    calls: dict[tuple[str, str], tuple[Call, NextKey]] = {}
    for variant, path, _ref in cases:
        call = functions[variant] if variant.startswith("fn-") else None
        http = call is None
        calls[(variant, path)] = (
            caller(app, token, f"/bench/{variant}/") if http else call,  # type: ignore[arg-type]
            keys("replay" if path == "replay" else "first"),
        )
    return calls


# -- round-trip prices -------------------------------------------------------------------


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


def measure_prices(rounds: int = 7, per_round: int = 200) -> dict[str, Price]:
    samples: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    work = probes()
    for probe in work.values():
        for _ in range(50):
            probe()
    for _ in range(rounds):
        for name, probe in work.items():
            walls = []
            started_cpu = time.thread_time()
            for _ in range(per_round):
                started = time.perf_counter()
                probe()
                walls.append(time.perf_counter() - started)
            cpu.setdefault(name, []).append((time.thread_time() - started_cpu) / per_round)
            samples.setdefault(name, []).append(statistics.median(walls))
    prices = {
        name: Price(statistics.median(samples[name]) * 1e6, statistics.median(cpu[name]) * 1e6)
        for name in work
    }
    select, both = prices["SELECT 1"], prices["transaction around SELECT 1"]
    # a transaction's BEGIN and COMMIT: two round trips
    prices["BEGIN + COMMIT"] = Price(both.wall_us - select.wall_us, both.cpu_us - select.cpu_us)
    return prices


# -- the measurement ---------------------------------------------------------------------


def count_trips(call: Call, next_key: NextKey) -> RoundTrips:
    return count_round_trips(lambda key: call(key), next_key)


@dataclass
class Samples:
    """Per request: wall, CPU, and their parts inside the round trips (seconds)."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    in_wall: list[float] = field(default_factory=list)
    in_cpu: list[float] = field(default_factory=list)

    def median_us(self, values: list[float]) -> float:
        return statistics.median(values) * 1e6

    def outside_us(self, total: list[float], inside: list[float]) -> float:
        return self.median_us([t - i for t, i in zip(total, inside, strict=True)])


def timed_blocks(
    calls: dict[tuple[str, str], tuple[Call, NextKey]], *, rounds: int, per_block: int
) -> dict[tuple[str, str], Samples]:
    """Every path in interleaved blocks, each request timed with its round trips."""
    from bench.trips import trip_timer

    samples = {case: Samples() for case in calls}
    with trip_timer() as spent:
        for _ in range(rounds):
            for case, (call, next_key) in calls.items():
                block = [next_key() for _ in range(per_block)]
                mine = samples[case]
                for key in block:
                    spent.reset()
                    cpu, wall = time.thread_time(), time.perf_counter()
                    call(key)
                    mine.wall.append(time.perf_counter() - wall)
                    mine.cpu.append(time.thread_time() - cpu)
                    mine.in_wall.append(spent.wall)
                    mine.in_cpu.append(spent.cpu)
    return samples


def measure(
    token: str,
    cases: tuple[tuple[str, str, str], ...],
    *,
    rounds: int,
    per_block: int,
    split_requests: int,
    cprofile: Path | None,
) -> tuple[dict[tuple[str, str], Path_], dict[str, Price], tuple[float, float]]:
    calls = build_calls(token, cases)
    for call, next_key in calls.values():  # warm up; prime the replay keys
        for _ in range(30):
            call(next_key())
    timed = timed_blocks(calls, rounds=rounds, per_block=per_block)
    per_event = hook_cost_per_event()
    results: dict[tuple[str, str], Path_] = {}
    for case, (call, next_key) in calls.items():
        block = [next_key() for _ in range(split_requests)]
        split = Split()

        def work(call: Call = call, block: list[str] = block) -> None:
            for key in block:
                call(key)

        split.run(work)
        s = timed[case]
        results[case] = Path_(
            wall_us=s.median_us(s.wall),
            cpu_us=s.median_us(s.cpu),
            trips=count_trips(call, next_key),
            in_trips_wall_us=s.median_us(s.in_wall),
            in_trips_cpu_us=s.median_us(s.in_cpu),
            outside_wall_us=s.outside_us(s.wall, s.in_wall),
            outside_cpu_us=s.outside_us(s.cpu, s.in_cpu),
            split=split.corrected(per_event, len(block)),
            calls={
                kind: (split.events[kind] + split.c_events[kind]) / 2 / len(block) for kind in KINDS
            },
        )
        if cprofile is not None:
            write_cprofile(cprofile, case, call, next_key, split_requests)
    return results, measure_prices(), (per_event[0] * 1e6, per_event[1] * 1e6)


def write_cprofile(
    folder: Path, case: tuple[str, str], call: Call, next_key: NextKey, requests: int
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    block = [next_key() for _ in range(requests)]
    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    for key in block:
        call(key)
    profiler.disable()
    with (folder / f"{case[0]}-{case[1]}.txt").open("w") as out:
        stats = pstats.Stats(profiler, stream=out)
        out.write(f"{case[0]} {case[1]}: {requests} requests, clock time.thread_time\n")
        stats.sort_stats("cumulative").print_stats(60)


def report(token: str, *, smoke: bool = False) -> str:
    """The breakdown's markdown (``python -m bench`` puts it in ``bench/RESULTS.md``)."""
    rounds, per_block, split = (1, 3, 5) if smoke else (15, 20, 300)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results, prices, per_event = measure(
        token, CASES, rounds=rounds, per_block=per_block, split_requests=split, cprofile=None
    )
    return markdown(CASES, results, prices, per_event, load)


def only(
    cases: tuple[tuple[str, str, str], ...], variants: str
) -> tuple[tuple[str, str, str], ...]:
    """``cases`` of the comma-separated ``variants``, with the references they are taken
    against (``bare`` first, ``noop`` replay, ``fn-plain`` call); ``--only`` of this
    module and of :mod:`bench.instructions`."""
    wanted = set(variants.split(","))
    chosen = [case for case in cases if case[0] in wanted]
    references = {case[2] for case in chosen}
    return tuple(case for case in cases if case in chosen or case[0] in references)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.breakdown", description=__doc__)
    parser.add_argument("--rounds", type=int, default=15, help="interleaved blocks per path")
    parser.add_argument("--per-block", type=int, default=20, help="requests per block")
    parser.add_argument("--split-requests", type=int, default=300, help="requests split per path")
    parser.add_argument("--cprofile", type=Path, help="write cProfile listings to this folder")
    parser.add_argument("--markdown", type=Path, help="write the tables to this file")
    parser.add_argument("--smoke", action="store_true", help="a few requests, to check it runs")
    parser.add_argument(
        "--only", help="comma-separated variants to measure (their references are added)"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.per_block, args.split_requests = 1, 3, 5
    from bench.servers import prepare_services
    from bench.variants import VARIANTS

    prepare_services([v for v in VARIANTS if v.kind != "peer"])
    from bench.profile import setup

    _app, token = setup()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    cases = only(CASES, args.only) if args.only else CASES
    results, prices, per_event = measure(
        token,
        cases,
        rounds=args.rounds,
        per_block=args.per_block,
        split_requests=args.split_requests,
        cprofile=args.cprofile,
    )
    report = markdown(cases, results, prices, per_event, load)
    print(report)
    if args.markdown is not None:
        args.markdown.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
