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
#: Read beside the kinds: the gunicorn workers' system (kernel) CPU, part of "gunicorn",
#: and their context switches (a count per request, not µs), voluntary (waiting on a
#: round trip) and not (preempted).
EXTRAS = ("gunicorn sys", "gunicorn waits", "gunicorn preempted", "rate", "busy")
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


def _process_seconds(pid: str) -> tuple[float, float]:
    """A process's CPU seconds: all of it, and the system (kernel) part."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    # utime and stime (fields 14 and 15); wrk is a child of this process and is read
    # from os.times() once it has been waited for
    return (int(fields[11]) + int(fields[12])) / _TICK, int(fields[12]) / _TICK


def _switches(pid: str) -> tuple[int, int]:
    """A process's voluntary and involuntary context switches, summed over its threads."""
    voluntary = involuntary = 0
    try:
        threads = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0, 0
    for thread in threads:
        try:
            lines = (thread / "status").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("voluntary_ctxt_switches"):
                voluntary += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches"):
                involuntary += int(line.split()[1])
    return voluntary, involuntary


def snapshot() -> dict[str, float]:
    """CPU seconds so far: each kind of process (live ones), the machine, and this
    process's children (wrk, once waited for)."""
    seconds = dict.fromkeys(KINDS + EXTRAS, 0.0)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            kind = _kind(pid)
            if kind is not None:
                total, system = _process_seconds(pid)
                seconds[kind] += total
                if kind == "gunicorn":
                    seconds["gunicorn sys"] += system
                    waits, preempted = _switches(pid)
                    # counts, scaled like seconds so that the report's µs per request
                    # reads as switches per request
                    seconds["gunicorn waits"] += waits / 1e6
                    seconds["gunicorn preempted"] += preempted / 1e6
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
    split = {kind: (after[kind] - before[kind]) / answered * 1e6 for kind in KINDS + EXTRAS}
    # requests per second, and how busy the machine's CPUs were (1.0: every CPU, always)
    split["rate"] = answered / phase.seconds
    split["busy"] = (after["machine"] - before["machine"]) / (phase.seconds * (os.cpu_count() or 1))
    return split


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
    """Median CPU µs per request by kind; the added columns against each path's reference;
    then the gunicorn workers' kernel CPU and context switches per request."""
    medians = {
        case: {kind: statistics.median(run[kind] for run in runs) for kind in KINDS + EXTRAS}
        for case, runs in by_case.items()
    }
    header = "| variant | path | " + " | ".join(KINDS) + " | added: " + " | ".join(KINDS) + " |"
    lines = [header, "| --- | --- |" + " ---: |" * (2 * len(KINDS))]
    extras = [
        "",
        "| variant | path | req/s | CPUs busy | gunicorn sys µs | switches: waits | preempted "
        "| added: sys µs | waits | preempted |",
        "| --- | --- |" + " ---: |" * 8,
    ]
    for (name, path), split in medians.items():
        base = medians.get((reference(path), path), split)
        own = " | ".join(f"{split[kind]:.0f}" for kind in KINDS)
        added = " | ".join(f"{split[kind] - base[kind]:+.0f}" for kind in KINDS)
        lines.append(f"| {name} | {path} | {own} | {added} |")
        sys_us, waits, preempted, rate, busy = (split[kind] for kind in EXTRAS)
        extras.append(
            f"| {name} | {path} | {rate:.0f} | {busy:.0%} | {sys_us:.0f} | {waits:.1f} "
            f"| {preempted:.1f} "
            f"| {sys_us - base['gunicorn sys']:+.0f} | {waits - base['gunicorn waits']:+.1f} "
            f"| {preempted - base['gunicorn preempted']:+.1f} |"
        )
    return "\n".join(lines + extras)


if __name__ == "__main__":
    sys.exit(main())
