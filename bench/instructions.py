"""What each path costs in instructions, a count the machine's load cannot move:
``python -m bench.instructions``.

Timings on a shared machine move with whatever else runs; the instructions a request
executes do not. Each path (and each round trip's probe) runs in its own process under
``valgrind --tool=callgrind`` twice, once with ``FEW`` requests after the warm-up and
once with ``MANY``; the difference over ``MANY - FEW`` is the user-space instructions of
one request, the start-up and the warm-up cancelled out. The kernel's work (the socket
calls of each round trip) and the servers' are not counted: this is the client's CPU
work, the part the layer and its drivers decide.

The peer libraries are counted too (drf-idempotency with Redis and with the database),
each in a process of its own settings against the same references, so a first
request of ours and of a peer compare without the machine's load between them. Before
counting, each path must answer as it should (a first request 201, a replay its
variant's replay status), or nothing is counted.

*Beyond the round trips* is a path's added instructions minus its added round trips
priced at the probes' (a ``SELECT 1`` through Django's cursor, a redis-py ``EVALSHA``, a
transaction's ``BEGIN`` and ``COMMIT``): what the layer's own Python and the Django/DRF
work it asks for cost. A real statement costs its driver more than ``SELECT 1`` (more
parameters, more columns), so this errs towards the layer.

Slow (each process runs ~50 times slower under valgrind): about 1 minute per path with
both CPUs free. Uses the benchmark's database and Redis (:mod:`bench.env`).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from bench.variants import FIRST, REPLAY, VARIANTS, Variant, reference

if TYPE_CHECKING:
    from bench.costs import RoundTrips

FEW, MANY = 40, 160

#: Peers left out: django-idempotency-key's lock lasts milliseconds, so under callgrind's
#: fiftyfold slowdown its answers change (423 Locked, a repeat run again).
UNCOUNTED_PEERS = frozenset({"django-idempotency-key"})
#: (variant, path, reference): our HTTP paths, then the peer libraries' (each in a
#: process of its own settings, against the same references); probes are ``probe-*``
#: with path ``call``.
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
) + tuple(
    (variant.name, path, reference(path))
    for variant in VARIANTS
    if variant.kind == "peer" and variant.name not in UNCOUNTED_PEERS
    for path in (FIRST, REPLAY)
)
PROBES = {
    "probe-select": "SELECT 1",
    "probe-evalsha": "redis-py EVALSHA",
    "probe-transaction": "transaction around SELECT 1",
    "probe-store-evalsha": "RedisStore EVALSHA",
}
#: Variants whose Redis commands go over RedisStore's own connections (priced by
#: ``probe-store-evalsha``); the others' (the response cache's) go through redis-py.
STORE_CONNECTIONS = frozenset({"redis"})


def only(
    cases: tuple[tuple[str, str, str], ...], variants: str
) -> tuple[tuple[str, str, str], ...]:
    """``cases`` of the comma-separated ``variants`` (``--only``), with the references
    they are taken against (``bare`` for a first request, ``noop`` for a replay)."""
    wanted = set(variants.split(","))
    chosen = [case for case in cases if case[0] in wanted]
    references = {case[2] for case in chosen}
    return tuple(case for case in cases if case in chosen or case[0] in references)


def peer(variant: str) -> Variant | None:
    """The peer library's variant named ``variant``; None for ours and the probes."""
    return next((v for v in VARIANTS if v.name == variant and v.kind == "peer"), None)


def _installed(variant: str) -> bool:
    other = peer(variant)
    return other is None or other.installed


def settings_and_url(variant: str) -> tuple[str, str]:
    """The settings module a path runs under and the URL it posts to: a peer's own server
    (its middleware around the bare view), or ours."""
    other = peer(variant)
    if other is not None:
        return other.settings, other.path
    return "bench.settings", f"/bench/{variant}/"


def run_requests(variant: str, path: str, count: int) -> None:
    """The measured process: warm up, then ``count`` requests of one path."""
    from bench.costs import caller, keys, probes, setup

    settings, url = settings_and_url(variant)
    app, token = setup(settings)
    if variant in PROBES:
        probe = probes()[PROBES[variant]]

        def call(key: str) -> object:
            return probe()
    else:
        http_call = caller(app, token, url)
        _check_answers(variant, http_call, keys(path), path)
        call = http_call  # type: ignore[assignment]
    next_key = keys("replay" if path == "replay" else "first")
    for _ in range(30):
        call(next_key())
    block = [next_key() for _ in range(count)]
    # What the warm-up left alive is frozen: a full collection of the whole heap (tens
    # of millions of instructions) would otherwise land in one of the two runs and not
    # the other, by chance, and move a path's count by hundreds of thousands.
    gc.collect()
    gc.freeze()
    for key in block:
        call(key)


def _check_answers(
    variant: str, call: Callable[[str], int], next_key: Callable[[], str], path: str
) -> None:
    """Refuse to count a path that does not answer as it should: a first request that
    is not created, or a "replay" that ran the view again (a peer's replay status)."""
    expected = next((v.expected_status(path) for v in VARIANTS if v.name == variant), None)
    if expected is None:
        return
    if path == REPLAY:
        call(next_key())  # the first request of the replayed key
    statuses = {call(next_key()) for _ in range(3)}
    if statuses != {expected}:
        raise RuntimeError(f"{variant} {path}: answered {statuses}, expected {expected}")


def collected(variant: str, path: str, count: int) -> int:
    """Instructions of a whole process running ``count`` requests, counted by callgrind."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "bench.instructions",
        "--run",
        variant,
        path,
        str(count),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{variant} {path} failed under callgrind:\n{done.stderr[-3000:]}")
    match = re.search(r"Collected : (\d+)", done.stderr)
    if match is None:
        raise RuntimeError(f"callgrind printed no count for {variant} {path}:\n{done.stderr}")
    return int(match.group(1))


def measure(cases: tuple[tuple[str, str, str], ...], jobs: int) -> dict[tuple[str, str], float]:
    """Instructions per request of every case and probe (two processes each)."""
    wanted = [(v, p) for v, p, _ in cases] + [(probe, "call") for probe in PROBES]
    runs = [(v, p, n) for v, p in wanted for n in (FEW, MANY)]
    with ThreadPoolExecutor(max(1, jobs)) as workers:
        totals = dict(zip(runs, workers.map(lambda run: collected(*run), runs), strict=True))
    return {(v, p): (totals[(v, p, MANY)] - totals[(v, p, FEW)]) / (MANY - FEW) for v, p in wanted}


def round_trips(cases: tuple[tuple[str, str, str], ...]) -> dict[tuple[str, str], RoundTrips]:
    """Each case's round trips, counted by :func:`bench.costs.count_round_trips`: ours in this
    process, a peer's in a process of its settings (``--trips``)."""
    from bench.costs import RoundTrips

    ours = [(variant, path) for variant, path, _ref in cases if peer(variant) is None]
    trips = _count_trips("bench.settings", ours)
    for variant, path, _ref in cases:
        other = peer(variant)
        if other is None:
            continue
        command = [sys.executable, "-m", "bench.instructions", "--trips", variant, path]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        # the counts are stdout's last three words (the peer's logs go to stderr)
        sql, transactions, redis = (int(n) for n in done.stdout.split()[-3:])
        trips[(variant, path)] = RoundTrips(sql, transactions, redis)
    return trips


def _count_trips(settings: str, paths: list[tuple[str, str]]) -> dict[tuple[str, str], RoundTrips]:
    from bench.costs import caller, count_round_trips, keys, setup

    app, token = setup(settings)
    trips = {}
    for variant, path in paths:
        call, next_key = caller(app, token, settings_and_url(variant)[1]), keys(path)
        for _ in range(5):  # connections, scripts and the replay key ready: steady state
            call(next_key())
        trips[(variant, path)] = count_round_trips(call, next_key)
    return trips


def markdown(
    cases: tuple[tuple[str, str, str], ...],
    counts: dict[tuple[str, str], float],
    trips: dict[tuple[str, str], RoundTrips],
    load: str,
) -> str:
    select = counts[("probe-select", "call")]
    evalsha = counts[("probe-evalsha", "call")]
    store_evalsha = counts[("probe-store-evalsha", "call")]
    transaction = counts[("probe-transaction", "call")] - select
    lines = [
        "## Instructions per request (`python -m bench.instructions`)\n",
        f"User-space instructions of one request, counted by callgrind ({MANY} requests "
        f"minus {FEW}, each path in its own process; load average at the start {load}, "
        "which moves none of these counts). Probes: `SELECT 1` through Django's cursor "
        f"{select:,.0f}, a redis-py `EVALSHA` {evalsha:,.0f} (on `RedisStore`'s own "
        f"connection {store_evalsha:,.0f}, the price of its paths' Redis commands), a "
        f"transaction's `BEGIN` + "
        f"`COMMIT` {transaction:,.0f}. *Beyond the round trips*: the added instructions "
        "minus the added round trips at those prices.\n",
        "| path | instructions | added | round trips added | at probe prices | "
        "**beyond the round trips** |",
        "| --- | ---: | ---: | --- | ---: | ---: |",
    ]
    for variant, path, ref in cases:
        ref_case = (ref, "first" if ref == "bare" else "replay")
        mine, theirs = trips[(variant, path)], trips[ref_case]
        sql = mine.sql - theirs.sql
        tx = mine.transactions - theirs.transactions
        redis = mine.redis - theirs.redis
        # a peer's commands (SET, GET) go through redis-py's command path, as EVALSHA does
        per_command = store_evalsha if variant in STORE_CONNECTIONS else evalsha
        price = sql * select + tx * transaction + redis * per_command
        spelt = ", ".join(
            f"{n:+d} {what}" for n, what in ((sql, "SQL"), (tx, "tx"), (redis, "Redis")) if n
        )
        added = counts[(variant, path)] - counts[ref_case]
        lines.append(
            f"| {variant} {path} | {counts[(variant, path)]:,.0f} | {added:+,.0f} | "
            f"{spelt or '0'} | {price:,.0f} | **{added - price:+,.0f}** |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("--run", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--trips", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="processes at once")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument(
        "--only", help="comma-separated variants to count (their references are added)"
    )
    args = parser.parse_args(argv)
    if args.run:
        variant, path, count = args.run
        run_requests(variant, path, int(count))
        return 0
    if args.trips:
        variant, path = args.trips
        counted = _count_trips(settings_and_url(variant)[0], [(variant, path)])[(variant, path)]
        print(counted.sql, counted.transactions, counted.redis)
        return 0
    from bench.servers import prepare_services

    prepare_services([v for v in VARIANTS if v.installed])
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    cases = only(CASES, args.only) if args.only else CASES
    cases = tuple(case for case in cases if _installed(case[0]))
    # counted first, in a process that imports the code the measured processes run
    trips = round_trips(cases)
    report = markdown(cases, measure(cases, args.jobs), trips, load)
    print(report)
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
