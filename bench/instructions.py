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

``--ablation`` prices the parts of the layer the same way: each path runs as built and
with one part replaced by :mod:`bench.ablation`'s stand-in (the fingerprint, the
outcome signals, the response capture, the replayed response, the stored format's
JSON); a part's price is the difference, in instructions, exact where the timed
ablation is within its noise.

Slow (each process runs ~50 times slower under valgrind): about 1 minute per path with
both CPUs free. Uses the benchmark's database and Redis, like :mod:`bench.breakdown`.
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

from bench.breakdown import CASES as BREAKDOWN_CASES
from bench.breakdown import only
from bench.variants import FIRST, REPLAY, VARIANTS, Variant, reference

if TYPE_CHECKING:
    from bench.costs import RoundTrips

FEW, MANY = 40, 160

#: Peers left out: django-idempotency-key's lock lasts milliseconds, so under callgrind's
#: fiftyfold slowdown its answers change (423 Locked, a repeat run again).
UNCOUNTED_PEERS = frozenset({"django-idempotency-key"})
#: (variant, path, reference): :mod:`bench.breakdown`'s HTTP cases, then the peer
#: libraries' (each in a process of its own settings, against the same references);
#: probes are ``probe-*`` with path ``call``.
CASES: tuple[tuple[str, str, str], ...] = tuple(
    case for case in BREAKDOWN_CASES if not case[0].startswith("fn-")
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


#: Paths ``--ablation`` prices by default (variant, path).
ABLATION_CASES = (
    ("redis", "first"),
    ("redis", "replay"),
    ("db-atomic", "first"),
    ("db-atomic", "replay"),
)
AS_BUILT = "as built"


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


def run_requests(variant: str, path: str, count: int, part: str = AS_BUILT) -> None:
    """The measured process: warm up, then ``count`` requests of one path (with ``part``
    replaced by its stand-in from :mod:`bench.ablation`, unless it is ``AS_BUILT``)."""
    from bench.profile import setup

    settings, url = settings_and_url(variant)
    app, token = setup(settings)
    if part == AS_BUILT:
        _requests(app, token, variant, url, path, count)
        return
    from bench.ablation import applied, stand_ins

    with applied(stand_ins()[part]):
        _requests(app, token, variant, url, path, count)


def _requests(app: object, token: str, variant: str, url: str, path: str, count: int) -> None:
    from bench.profile import caller, keys

    if variant in PROBES:
        from bench.breakdown import probes

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


def collected(variant: str, path: str, count: int, part: str = AS_BUILT) -> int:
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
        part,
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


def measure_parts(
    cases: tuple[tuple[str, str], ...], jobs: int
) -> dict[tuple[str, str, str], float]:
    """Instructions per request of every path as built and with each part stood in."""
    from bench.ablation import stand_ins

    parts = [AS_BUILT, *stand_ins()]
    runs = [(v, p, n, part) for v, p in cases for part in parts for n in (FEW, MANY)]
    with ThreadPoolExecutor(max(1, jobs)) as workers:
        totals = dict(zip(runs, workers.map(lambda run: collected(*run), runs), strict=True))
    return {
        (v, p, part): (totals[(v, p, MANY, part)] - totals[(v, p, FEW, part)]) / (MANY - FEW)
        for v, p in cases
        for part in parts
    }


def parts_markdown(
    cases: tuple[tuple[str, str], ...], counts: dict[tuple[str, str, str], float], load: str
) -> str:
    from bench.ablation import stand_ins

    parts = list(stand_ins())
    lines = [
        "## What each part costs, in instructions (`python -m bench.instructions --ablation`)\n",
        f"User-space instructions per request ({MANY} requests minus {FEW}, each arm in its "
        f"own process; load average at the start {load}): the path as built, and what each "
        "part costs (as built minus the path with that part replaced by a stand-in).\n",
        "| path | as built | " + " | ".join(parts) + " |",
        "| --- | ---: |" + " ---: |" * len(parts),
    ]
    for variant, path in cases:
        built = counts[(variant, path, AS_BUILT)]
        cells = " | ".join(f"{built - counts[(variant, path, part)]:+,.0f}" for part in parts)
        lines.append(f"| {variant} {path} | {built:,.0f} | {cells} |")
    return "\n".join(lines) + "\n"


def round_trips(cases: tuple[tuple[str, str, str], ...]) -> dict[tuple[str, str], RoundTrips]:
    """Each case's round trips, counted as :mod:`bench.breakdown` does: ours in this
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
    from bench.costs import count_round_trips
    from bench.profile import caller, keys, setup

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
    parser.add_argument("--run", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--trips", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument(
        "--ablation",
        action="store_true",
        help="price the layer's parts (fingerprint, signals, capture, ...) instead",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="processes at once")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument(
        "--only", help="comma-separated variants to count (their references are added)"
    )
    args = parser.parse_args(argv)
    if args.run:
        variant, path, count, *part = args.run
        run_requests(variant, path, int(count), *part)
        return 0
    if args.trips:
        variant, path = args.trips
        counted = _count_trips(settings_and_url(variant)[0], [(variant, path)])[(variant, path)]
        print(counted.sql, counted.transactions, counted.redis)
        return 0
    from bench.servers import prepare_services

    prepare_services([v for v in VARIANTS if v.installed])
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if args.ablation:
        report = parts_markdown(ABLATION_CASES, measure_parts(ABLATION_CASES, args.jobs), load)
    else:
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
