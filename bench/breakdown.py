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
from types import CodeType, FrameType
from typing import Any

from bench.costs import RoundTrips, count_round_trips

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

#: Kinds of code, innermost first wins; see :func:`classify`.
KINDS = (
    "sql",
    "transaction",
    "redis",
    "cache client",
    "signals",
    "logging",
    "capture/replay",
    "encoding",
    "fingerprint/key",
    "layer",
    "django/drf",
    "other",
)

_TRANSACTION_FUNCTIONS = frozenset(
    {
        "commit",
        "_commit",
        "rollback",
        "_rollback",
        "set_autocommit",
        "_set_autocommit",
        "savepoint",
        "_savepoint",
        "savepoint_commit",
        "_savepoint_commit",
        "savepoint_rollback",
        "_savepoint_rollback",
        "on_commit",
        "run_and_clear_commit_hooks",
    }
)
_ENCODING_FUNCTIONS = frozenset(
    {"headers_json", "from_parts", "encode_result", "decode_result", "_json", "_data", "_text"}
)


def classify(code: CodeType) -> str | None:
    """The kind of a Python function, or None to inherit its caller's."""
    path = code.co_filename.replace("\\", "/")
    name = code.co_name
    if "/idempotency/" in path:
        tail = path.rsplit("/idempotency/", 1)[1]
        if tail.startswith("http/responses"):
            return "capture/replay"
        if tail.startswith(("http/fingerprints", "http/keys")):
            return "fingerprint/key"
        if name in _ENCODING_FUNCTIONS:
            return "encoding"
        return "layer"
    if "/django/db/backends/" in path:
        return "transaction" if name in _TRANSACTION_FUNCTIONS else "sql"
    if "/django/db/transaction.py" in path:
        return "transaction"
    if "/psycopg/" in path or "/psycopg_binary/" in path:
        return None  # the driver: charged to the SQL or transaction call above it
    if "/django_redis/" in path:
        return "cache client"
    if "/redis/" in path or "/hiredis/" in path:
        return "redis"
    if "/django/dispatch/" in path:
        return "signals"
    if path.endswith("/logging/__init__.py"):
        return "logging"
    if "/django/" in path or "/rest_framework/" in path or "/asgiref/" in path:
        return "django/drf"
    if "/bench/" in path:
        return "django/drf"  # the view's own body
    return None


class Split:
    """Charges the request thread's CPU time to the innermost kind of code running."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = dict.fromkeys(KINDS, 0.0)
        self.events: dict[str, int] = dict.fromkeys(KINDS, 0)  # Python call/return
        self.c_events: dict[str, int] = dict.fromkeys(KINDS, 0)  # C call/return
        self._kinds: dict[CodeType, str | None] = {}
        self._stack: list[str] = ["other"]
        self._last = 0.0

    def _hook(self, frame: FrameType, event: str, arg: Any) -> None:
        now = time.thread_time()
        stack = self._stack
        current = stack[-1]
        self.cpu[current] += now - self._last
        if event.startswith("c_"):
            self.c_events[current] += 1
        else:
            self.events[current] += 1
        if event == "call":
            code = frame.f_code
            try:
                kind = self._kinds[code]
            except KeyError:
                kind = self._kinds[code] = classify(code)
            stack.append(kind or current)
        elif event == "c_call":
            stack.append(current)
        elif len(stack) > 1:  # return, c_return, c_exception
            stack.pop()
        self._last = time.thread_time()

    def run(self, work: Callable[[], object]) -> None:
        self._stack = ["other"]
        self._last = time.thread_time()
        sys.setprofile(self._hook)
        try:
            work()
        finally:
            sys.setprofile(None)
        self.cpu["other"] += time.thread_time() - self._last

    def corrected(self, per_event: tuple[float, float], requests: int) -> dict[str, float]:
        """µs per request per kind, the hook's residual cost per event taken off."""
        py, c = per_event
        return {
            kind: max(0.0, self.cpu[kind] - self.events[kind] * py - self.c_events[kind] * c)
            / requests
            * 1e6
            for kind in KINDS
        }


def hook_cost_per_event() -> tuple[float, float]:
    """CPU seconds the hook adds per Python and per C call event that its own clock reads
    do not exclude (the best of a few tries of each)."""

    def empty() -> None:
        return None

    def python_calls() -> None:
        for _ in range(20000):
            empty()

    def c_calls() -> None:
        items: list[int] = []
        for _ in range(20000):
            len(items)

    def cost(work: Callable[[], None], events: Callable[[Split], int]) -> float:
        best = float("inf")
        for _ in range(5):
            started = time.thread_time()
            work()
            bare = time.thread_time() - started
            split = Split()
            split.run(work)
            charged = sum(split.cpu.values())
            best = min(best, max(0.0, charged - bare) / max(1, events(split)))
        return best

    py = cost(python_calls, lambda split: sum(split.events.values()))
    c = cost(c_calls, lambda split: sum(split.c_events.values()))
    return py, c


# -- the paths ---------------------------------------------------------------------------


def function_calls() -> dict[str, Call]:
    """The function paths: the plain body, and under ``@idempotent_function``."""
    from idempotency import DatabaseStore, RedisStore, idempotent_function

    def settle(ref: str) -> dict[str, Any]:
        return {"ref": ref, "status": "settled", "amount": 1}

    on_db = idempotent_function(key="bench:{ref}", store=DatabaseStore())(settle)
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


@dataclass(frozen=True)
class Price:
    wall_us: float
    cpu_us: float


def probes() -> dict[str, Callable[[], object]]:
    from django.core.cache import cache
    from django.db import connection, transaction
    from django_redis import get_redis_connection

    client = get_redis_connection("default")
    script = client.register_script("return 1")
    script()

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


@dataclass
class Path_:
    wall_us: float
    cpu_us: float
    trips: RoundTrips
    #: µs per request inside the round trips (see :func:`service_wall`)
    services_us: float = 0.0
    split: dict[str, float] = field(default_factory=dict)
    #: function calls (Python and C) per request by kind: deterministic, unlike times
    calls: dict[str, float] = field(default_factory=dict)


def count_trips(call: Call, next_key: NextKey) -> RoundTrips:
    return count_round_trips(lambda key: call(key), next_key)


def service_wall(call: Call, next_key: NextKey, requests: int) -> float:
    """Median µs per request spent inside SQL statements, commits/rollbacks and Redis
    replies: the round trips with the servers' own work (a durable COMMIT's WAL flush
    included)."""
    import redis
    from django.db import connection

    spent = [0.0]

    def timed(func: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - started

        return wrapper

    def sql(execute: Callable[..., object], *args: object) -> object:
        return timed(execute)(*args)

    conn_class = redis.connection.AbstractConnection
    send, read = conn_class.send_command, conn_class.read_response
    conn_class.send_command = timed(send)  # type: ignore[method-assign]
    conn_class.read_response = timed(read)  # type: ignore[method-assign]
    connection._commit = timed(connection._commit)  # type: ignore[method-assign]
    connection._rollback = timed(connection._rollback)  # type: ignore[method-assign]
    block = [next_key() for _ in range(requests)]
    per_request: list[float] = []
    try:
        with connection.execute_wrapper(sql):
            for key in block:
                spent[0] = 0.0
                call(key)
                per_request.append(spent[0])
    finally:
        conn_class.send_command = send  # type: ignore[method-assign]
        conn_class.read_response = read  # type: ignore[method-assign]
        del connection._commit, connection._rollback
    return statistics.median(per_request) * 1e6


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
    walls: dict[tuple[str, str], list[float]] = {case: [] for case in calls}
    cpus: dict[tuple[str, str], list[float]] = {case: [] for case in calls}
    for _ in range(rounds):
        for case, (call, next_key) in calls.items():
            block = [next_key() for _ in range(per_block)]
            started_cpu = time.thread_time()
            for key in block:
                started = time.perf_counter()
                call(key)
                walls[case].append(time.perf_counter() - started)
            cpus[case].append((time.thread_time() - started_cpu) / per_block)
    per_event = hook_cost_per_event()
    results: dict[tuple[str, str], Path_] = {}
    for case, (call, next_key) in calls.items():
        block = [next_key() for _ in range(split_requests)]
        split = Split()

        def work(call: Call = call, block: list[str] = block) -> None:
            for key in block:
                call(key)

        split.run(work)
        results[case] = Path_(
            wall_us=statistics.median(walls[case]) * 1e6,
            cpu_us=statistics.median(cpus[case]) * 1e6,
            trips=count_trips(call, next_key),
            services_us=service_wall(call, next_key, max(20, split_requests // 3)),
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


# -- the report --------------------------------------------------------------------------


def trip_price(trips: RoundTrips, ref: RoundTrips, prices: dict[str, Price]) -> tuple[str, float]:
    """The added round trips, spelt out, and their measured wall price."""
    sql = trips.sql - ref.sql
    tx = trips.transactions - ref.transactions
    rd = trips.redis - ref.redis
    price = (
        sql * prices["SELECT 1"].wall_us
        + tx * prices["BEGIN + COMMIT"].wall_us
        + rd * prices["redis-py EVALSHA"].wall_us
    )
    parts = [f"{n:+d} {what}" for n, what in ((sql, "SQL"), (tx, "tx"), (rd, "Redis")) if n]
    return (", ".join(parts) or "0"), price


def markdown(
    cases: tuple[tuple[str, str, str], ...],
    results: dict[tuple[str, str], Path_],
    prices: dict[str, Price],
    per_event_us: tuple[float, float],
    load: str,
) -> str:
    lines: list[str] = []
    add = lines.append
    add("## Where the time goes, path by path (`python -m bench.breakdown`)\n")
    add(
        f"In-process, one request at a time, interleaved blocks; load average at the start "
        f"{load}. *Round trips* counts SQL statements (savepoints included), transactions "
        "(BEGIN and COMMIT/ROLLBACK: 2 round trips each) and Redis commands; their *price* is "
        "what the added ones cost at the prices below. *Beyond the round trips* is the added "
        "wall time minus that price: the target is ≤ 150 µs on a first request and ≤ 60 µs "
        "on a replay. *In the round trips* is the wall time measured inside every SQL "
        "statement, COMMIT/ROLLBACK and Redis reply of the request (the server's own work, "
        "such as a durable commit's WAL flush, included; Django's cursor and the driver's "
        "CPU too), and *beyond them* the added wall time outside those calls.\n"
    )
    add("| probe | wall µs | request-thread CPU µs |")
    add("| --- | ---: | ---: |")
    for name, price in prices.items():
        add(f"| {name} | {price.wall_us:.0f} | {price.cpu_us:.0f} |")
    add("")
    add(
        "| path | reference | wall µs | added | CPU µs | added | round trips added | "
        "their price µs | **beyond the round trips µs** | in the round trips µs (added) | "
        "beyond them µs |"
    )
    add("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for variant, path, ref_name in cases:
        mine = results[(variant, path)]
        ref = _reference(results, ref_name)
        trips, price = trip_price(mine.trips, ref.trips, prices)
        added = mine.wall_us - ref.wall_us
        add(
            f"| {variant} {path} | {ref_name} | {mine.wall_us:.0f} | {added:+.0f} | "
            f"{mine.cpu_us:.0f} | {mine.cpu_us - ref.cpu_us:+.0f} | {trips} | {price:.0f} | "
            f"**{added - price:+.0f}** | {mine.services_us:.0f} "
            f"({mine.services_us - ref.services_us:+.0f}) | "
            f"{added - (mine.services_us - ref.services_us):+.0f} |"
        )
    add("")
    add("In-process targets (issue 18): the added wall time beyond the added round trips' price.\n")
    add("| path | beyond the round trips µs | target µs | met |")
    add("| --- | ---: | ---: | --- |")
    for variant, path, ref_name in cases:
        if variant == ref_name:
            continue
        mine, ref = results[(variant, path)], _reference(results, ref_name)
        _trips, price = trip_price(mine.trips, ref.trips, prices)
        beyond = mine.wall_us - ref.wall_us - price
        goal = 60 if path == "replay" else 150
        met = "yes" if beyond <= goal else "**no**"
        add(f"| {variant} {path} | {beyond:+.0f} | ≤ {goal} | {met} |")
    add("")
    add(
        "The request thread's CPU time added, by the kind of code that ran it (µs per "
        f"request, the profiler hook's own cost taken off: {per_event_us[0]:.2f} µs per "
        f"Python call or return, {per_event_us[1]:.2f} µs per C call or return; what remains "
        "of its distortion shows as the difference between a row's total and the *CPU "
        "added* above). *sql*: "
        "Django's cursor and psycopg for each statement; *transaction*: atomic(), BEGIN, "
        "COMMIT, savepoints; *redis*: redis-py's command path; *cache client*: django-redis "
        "around it; *signals*: dispatch and receivers; *capture/replay*: "
        "`http/responses.py`; *encoding*: the stored format's JSON; *fingerprint/key*: "
        "`http/fingerprints.py`, `http/keys.py`; *layer*: the rest of `idempotency/`; "
        "*django/drf*: request handling, the view, rendering, the ORM.\n"
    )
    shown = [k for k in KINDS if k != "other"]
    add("| path | " + " | ".join(shown) + " | other | total |")
    add("| --- |" + " ---: |" * (len(shown) + 2))
    for variant, path, ref_name in cases:
        if variant == ref_name:
            continue
        mine = results[(variant, path)]
        ref = _reference(results, ref_name)
        diff = {k: mine.split[k] - ref.split[k] for k in KINDS}
        cells = " | ".join(f"{diff[k]:+.0f}" for k in shown)
        add(f"| {variant} {path} | {cells} | {diff['other']:+.0f} | {sum(diff.values()):+.0f} |")
    add("")
    add(
        "Function calls per request added, by kind (Python and C calls, counted by the same "
        "hook: unlike the times above they do not move with the machine's load, so they "
        "show work removed or added exactly):\n"
    )
    add("| path | " + " | ".join(shown) + " | other | total |")
    add("| --- |" + " ---: |" * (len(shown) + 2))
    for variant, path, ref_name in cases:
        if variant == ref_name:
            continue
        mine, ref = results[(variant, path)], _reference(results, ref_name)
        diff = {k: mine.calls[k] - ref.calls[k] for k in KINDS}
        cells = " | ".join(f"{diff[k]:+.0f}" for k in shown)
        add(f"| {variant} {path} | {cells} | {diff['other']:+.0f} | {sum(diff.values()):+.0f} |")
    add("")
    add("Absolute split of each reference (µs per request):\n")
    add("| reference | " + " | ".join(shown) + " | other | total |")
    add("| --- |" + " ---: |" * (len(shown) + 2))
    for name in sorted({ref for _v, _p, ref in cases}):
        ref = _reference(results, name)
        cells = " | ".join(f"{ref.split[k]:.0f}" for k in shown)
        add(f"| {name} | {cells} | {ref.split['other']:.0f} | {sum(ref.split.values()):.0f} |")
    return "\n".join(lines) + "\n"


def _reference(results: dict[tuple[str, str], Path_], name: str) -> Path_:
    case = {"bare": ("bare", "first"), "noop": ("noop", "replay")}.get(name, (name, "call"))
    return results[case]


def report(token: str, *, smoke: bool = False) -> str:
    """The breakdown's markdown (``python -m bench`` puts it in ``bench/RESULTS.md``)."""
    rounds, per_block, split = (1, 3, 5) if smoke else (15, 20, 300)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results, prices, per_event = measure(
        token, CASES, rounds=rounds, per_block=per_block, split_requests=split, cprofile=None
    )
    return markdown(CASES, results, prices, per_event, load)


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
    from bench.run import prepare_services
    from bench.variants import VARIANTS

    prepare_services([v for v in VARIANTS if v.kind != "peer"])
    from bench.profile import setup

    _app, token = setup()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    cases = CASES
    if args.only:
        wanted = set(args.only.split(","))
        cases = tuple(c for c in CASES if c[0] in wanted or c[0] == c[2])
        needed = {c[2] for c in cases if c[0] != c[2]}
        cases = tuple(c for c in cases if c[0] != c[2] or c[0] in needed)
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
