"""The floor under load: what a layer costing only its round trips would score.

``python -m bench.floor [--rounds N] [--duration S] [--output FILE] [--smoke]`` runs,
under the same wrk load and in the same interleaved rounds as ``python -m bench``, our
Redis and database variants beside stand-ins that add to the reference endpoints the
same number of round trips and nothing else (:mod:`bench.benchapp.floor_views`). A
stand-in's ratio is the best a layer of that many trips can reach on this machine; the
gap between it and the variant is the layer's own code and its stores' work beyond a
bare read (on the database, the writes where the stand-in reads). Two more stand-ins
call one store method alone (``RedisStore.claim``, ``DatabaseStore.lookup`` on a
completed record), to tell the store's trip from the code around it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from bench.data import reset_data, setup_django
from bench.load import wrk_path
from bench.options import parse
from bench.report import Results
from bench.servers import loadavg, machine_facts, prepare_services, running
from bench.stages import Stage, measure_steady_paths
from bench.variants import FIRST, REPLAY, VARIANTS, Variant

RESULTS = Path(__file__).resolve().parent / "RESULTS_FLOOR.md"
MEASURED = ("bare", "noop", "redis", "db-atomic", "db-redis-cache")
STAND_INS = (
    Variant("noop-redis", "noop + one Redis GET", "bench.settings", "/bench/noop-redis/",
            "reference", (REPLAY,), replay_status=200),
    Variant("noop-eval", "noop + one EVALSHA of a script that GETs", "bench.settings",
            "/bench/noop-eval/", "reference", (REPLAY,), replay_status=200),
    Variant("noop-store", "noop + RedisStore.claim meeting a completed record",
            "bench.settings", "/bench/noop-store/", "reference", (REPLAY,), replay_status=200),
    Variant("noop-dbstore", "noop + DatabaseStore.lookup of a completed record",
            "bench.settings", "/bench/noop-dbstore/", "reference", (REPLAY,), replay_status=200),
    Variant("noop-sql", "noop + one SELECT by primary key", "bench.settings",
            "/bench/noop-sql/", "reference", (REPLAY,), replay_status=200),
    Variant("bare-redis2", "bare + two Redis GET", "bench.settings", "/bench/bare-redis2/",
            "reference", (FIRST,)),
    Variant("bare-sql4", "bare + four SELECT (one before its transaction, three in it)",
            "bench.settings", "/bench/bare-sql4/", "reference", (FIRST,)),
)  # fmt: skip
#: Which stand-in each variant's path is held against (same trips, nothing else).
FLOOR_OF = {
    ("redis", FIRST): "bare-redis2",
    ("db-atomic", FIRST): "bare-sql4",
    ("redis", REPLAY): "noop-redis",
    ("db-redis-cache", REPLAY): "noop-redis",
    ("db-atomic", REPLAY): "noop-sql",
}


def variants() -> list[Variant]:
    ours = [
        replace(
            v, paths=tuple(p for p in v.paths if (v.name, p) in FLOOR_OF or v.kind == "reference")
        )
        for v in VARIANTS
        if v.name in MEASURED
    ]
    return ours + list(STAND_INS)


def measure(rounds: int, duration: float, *, smoke: bool = False) -> tuple[Results, float]:
    argv = ["--rounds", str(rounds), "--duration", str(duration), "--no-peers"]
    options = parse(argv + (["--smoke"] if smoke else []))
    chosen = variants()
    results = Results()
    wrk_path()
    prepare_services(chosen)
    setup_django()
    from bench.benchapp.floor_views import prepare

    users = reset_data()  # it empties the record table: the stand-ins' records come after
    prepare()
    results.machine = machine_facts()
    results.machine["load_before"] = loadavg()
    started = time.perf_counter()
    with running(chosen, prefix="idem-floor-") as servers:
        measure_steady_paths(Stage(options, chosen, servers, users, results))
    results.machine["load_after_load"] = loadavg()
    return results, time.perf_counter() - started


def _ratio(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def markdown(results: Results, command: str, seconds: float) -> str:
    machine = results.machine
    lines = [
        "# The floor under load: round trips and nothing else",
        "",
        f"Command: `{command}` ({seconds:.0f} s). Load average before / after: "
        f"{machine.get('load_before', '?')} / {machine.get('load_after_load', '?')}.  ",
        f"Machine: {machine.get('nproc')} CPUs, {machine.get('cpu')}; PostgreSQL "
        f"{machine.get('postgresql')}, Redis {machine.get('redis')}; Python "
        f"{machine.get('python')}. Servers and load as in `bench/RESULTS.md` (gunicorn, 2 "
        "sync workers per variant, wrk with 4 connections on the same machine).",
        "",
        "Ratios: good req/s over the reference runs beside each run (`bare` for first "
        "requests, `noop` for replays), medians of the rounds (range). A stand-in adds "
        "the variant's round trips to the reference and nothing else.",
        "",
        "| path | variant | ratio | stand-in with the same trips | its ratio | gap |",
        "| --- | --- | ---: | --- | ---: | ---: |",
    ]
    for (name, path), floor in FLOOR_OF.items():
        ours = results.ratios.get((name, path), [])
        base = results.ratios.get((floor, path), [])
        gap = f"{statistics.median(base) - statistics.median(ours):+.2f}" if ours and base else "–"
        lines.append(f"| {path} | {name} | {_ratio(ours)} | {floor} | {_ratio(base)} | {gap} |")
    lines += [
        "",
        "Every run, in the order of what it adds:",
        "",
        "| path | variant | what it adds to the reference | ratio |",
        "| --- | --- | --- | ---: |",
    ]
    described = {v.name: v.description for v in variants()}
    for (name, path), values in sorted(
        results.ratios.items(), key=lambda item: (item[0][1], -statistics.median(item[1]))
    ):
        lines.append(f"| {path} | {name} | {described.get(name, '')} | {_ratio(values)} |")
    if results.failures:
        lines += ["", "Failures:", *(f"- {failure}" for failure in results.failures)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument(
        "--output", type=Path, default=RESULTS, help="markdown report (smoke: none)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="one short round: the machinery works (CI)"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.duration, args.output = 1, 0.5, None
    command = "python -m bench.floor " + " ".join(argv if argv is not None else sys.argv[1:])
    results, seconds = measure(args.rounds, args.duration, smoke=args.smoke)
    report = markdown(results, command.strip(), seconds)
    if args.output is not None:
        args.output.write_text(report)
    print(report)
    return 1 if results.failures else 0


if __name__ == "__main__":
    sys.exit(main())
