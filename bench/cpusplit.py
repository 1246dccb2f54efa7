"""Where the machine's CPU goes under load: ``python -m bench.cpusplit``.

In-process measurements (``bench.breakdown``) see the request thread only. Under wrk the
ratio is set by the whole machine's CPU per request: the gunicorn workers (the layer,
Django, the drivers), the PostgreSQL backends (parsing, planning, executing, WAL), the
Redis server, wrk itself and the kernel. This runs each variant's path under wrk, alone,
and reads every process's CPU time (``/proc/<pid>/stat``) and the machine's
(``/proc/stat``) before and after: CPU µs per answered request, split by process, and
what each variant adds to its reference (``bare`` for first requests, ``noop`` for
replays), interleaved over ``--rounds``.

It owns the benchmark's database and Redis database as ``python -m bench`` does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from bench.variants import FIRST, REPLAY, VARIANTS, Variant, reference

if TYPE_CHECKING:
    from bench.servers import Server

KINDS = ("gunicorn", "postgres", "redis", "wrk", "other", "machine")
_TICK = os.sysconf("SC_CLK_TCK")


def _kind(pid: str) -> str | None:
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if comm.startswith("postgres"):
        return "postgres"
    if comm.startswith("redis"):
        return "redis"
    if comm == "wrk":
        return "wrk"
    return "gunicorn" if b"gunicorn" in command else "other"


def _process_seconds(pid: str) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # utime and stime (fields 14 and 15), plus the children waited for (16 and 17): wrk
    # is a child of this process and has ended by the time it is read
    return sum(int(value) for value in fields[11:13]) / _TICK


def snapshot() -> dict[str, float]:
    """CPU seconds so far: each kind of process (live ones), the machine, and this
    process's children (wrk, once waited for)."""
    seconds = dict.fromkeys(KINDS, 0.0)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            kind = _kind(pid)
            if kind is not None:
                seconds[kind] += _process_seconds(pid)
    own = os.times()
    seconds["wrk"] += own.children_user + own.children_system
    busy = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(value) for value in busy]
    seconds["machine"] = (sum(ticks) - ticks[3] - ticks[4]) / _TICK  # all but idle, iowait
    return seconds


def measure(
    variant: Variant, path: str, server: Server, token: str, seconds: float
) -> dict[str, float]:
    """CPU µs per answered request of ``variant`` on ``path``, by kind."""
    from bench.load import run_wrk
    from bench.probes import prime

    key = f"split-{uuid.uuid4().hex}"
    if path == REPLAY and variant.kind != "reference":
        prime(server, variant, token, key)
    before = snapshot()
    phase = run_wrk(
        f"{server.base_url}{variant.path}",
        mode="fixed" if path == REPLAY else "unique",
        token=token,
        key=key,
        seconds=seconds,
    )
    after = snapshot()
    answered = max(1, sum(phase.statuses.values()))
    return {kind: (after[kind] - before[kind]) / answered * 1e6 for kind in KINDS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cpusplit", description=__doc__)
    parser.add_argument("--variants", default="db-atomic,redis", help="comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    args = parser.parse_args(argv)
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()
    from bench.data import reset_data
    from bench.servers import Server, prepare_services  # noqa: F811 - at run time

    wanted = set(args.variants.split(","))
    chosen = [v for v in VARIANTS if v.name in wanted and v.installed]
    cases = [(v, p) for v in chosen for p in (FIRST, REPLAY) if p in v.paths]
    names = {v.name for v, _ in cases} | {reference(p) for _, p in cases}
    variants = [v for v in VARIANTS if v.name in names]
    prepare_services(variants)
    users = reset_data()
    servers = {v.name: Server(v.name, v.settings) for v in variants}
    log_dir = Path(tempfile.mkdtemp(prefix="idem-cpusplit-"))
    try:
        for server in servers.values():
            server.start(log_dir)
        for server in servers.values():
            server.wait_ready()
        by_case: dict[tuple[str, str], list[dict[str, float]]] = {}
        runs = [(v, p) for p in (FIRST, REPLAY) for v in variants if p in v.paths]
        runs = [(v, p) for v, p in runs if (v, p) in cases or v.name == reference(p)]
        for _round in range(args.rounds):
            for variant, path in runs:
                server = servers[variant.name]
                split = measure(variant, path, server, users.token, args.duration)
                by_case.setdefault((variant.name, path), []).append(split)
    finally:
        for server in servers.values():
            server.stop()
    print(report(by_case))
    return 0


def report(by_case: dict[tuple[str, str], list[dict[str, float]]]) -> str:
    """Median CPU µs per request by kind; the added columns against each path's reference."""
    medians = {
        case: {kind: statistics.median(run[kind] for run in runs) for kind in KINDS}
        for case, runs in by_case.items()
    }
    header = "| variant | path | " + " | ".join(KINDS) + " | added: " + " | ".join(KINDS) + " |"
    lines = [header, "| --- | --- |" + " ---: |" * (2 * len(KINDS))]
    for (name, path), split in medians.items():
        base = medians.get((reference(path), path), split)
        own = " | ".join(f"{split[kind]:.0f}" for kind in KINDS)
        added = " | ".join(f"{split[kind] - base[kind]:+.0f}" for kind in KINDS)
        lines.append(f"| {name} | {path} | {own} | {added} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
