"""The ASGI stage (``python -m bench --asgi``): ``async def`` views under uvicorn.

uvicorn with 2 workers, wrk with ``ASGI_CONNECTIONS`` connections, interleaved rounds:
the bare async view runs before, between and after the variants, and each variant's
ratio is its good responses per second over the mean of the two bare runs beside it (as
the gunicorn stage does, :mod:`bench.phases`). A replay sends one primed key; the bare
view answers 201 to it as to any request.
"""

from __future__ import annotations

import statistics
import uuid

from bench.load import Phase, run_wrk
from bench.options import Options
from bench.probes import prime
from bench.progress import log
from bench.servers import Server
from bench.variants import ASGI_VARIANTS, FIRST, REPLAY, Variant, rotate

ASGI_CONNECTIONS = 32


def measure_asgi(
    options: Options, servers: dict[str, Server], token: str
) -> tuple[dict[tuple[str, str], list[float]], list[str]]:
    """The ratios of each (variant, path) over its rounds, and the failures seen."""
    run_id = uuid.uuid4().hex[:8]
    variants = [v for v in ASGI_VARIANTS if options.variants is None or _chosen(v, options)]
    ref = next(v for v in variants if v.kind == "reference")
    ours = [v for v in variants if v is not ref]
    replay_keys = {v.name: f"replay-{v.name}-{run_id}" for v in variants}
    for v in variants:
        prime(servers[v.name], v, token, replay_keys[v.name])
    failures: list[str] = []

    def phase(v: Variant, path: str, seconds: float, tag: str) -> Phase:
        url = servers[v.name].base_url + v.path
        if path == FIRST:
            key, mode = f"first-{v.name}-{run_id}-{tag}", "unique"
        else:
            key, mode = replay_keys[v.name], "fixed"
        result = run_wrk(
            url, mode=mode, token=token, key=key, seconds=seconds, connections=ASGI_CONNECTIONS
        )
        servers[v.name].check_alive()
        bad = {s: n for s, n in result.statuses.items() if s != 201}
        if bad or not result.requests:
            failures.append(f"{v.name} {path}: statuses {result.statuses}")
        return result

    if options.warmup:
        log("asgi: warming up")
        for v in variants:
            for path in (FIRST, REPLAY):
                phase(v, path, options.warmup, "warmup")
    ratios: dict[tuple[str, str], list[float]] = {}
    for round_no in range(options.rounds):
        for path in (FIRST, REPLAY):
            order = rotate(ours, round_no)
            log(f"asgi round {round_no + 1}/{options.rounds} {path}: " + " ".join(
                v.name for v in order))  # fmt: skip
            before = phase(ref, path, options.duration, f"r{round_no}-ref0")
            for i, v in enumerate(order):
                measured = phase(v, path, options.duration, f"r{round_no}")
                after = phase(ref, path, options.duration, f"r{round_no}-ref{i + 1}")
                neighbours = (before.good_rps(201) + after.good_rps(201)) / 2
                if neighbours:
                    ratios.setdefault((v.name, path), []).append(
                        measured.good_rps(201) / neighbours
                    )
                ratios.setdefault((ref.name, path), []).extend(
                    [before.good_rps(201), after.good_rps(201)]
                )
                before = after
    return ratios, failures


def _chosen(v: Variant, options: Options) -> bool:
    return v.kind == "reference" or v.name in (options.variants or ())


def render_asgi(ratios: dict[tuple[str, str], list[float]], options: Options) -> str:
    """A markdown table: each variant's median ratio (and its range) per path."""
    lines = [
        f"ASGI: uvicorn, 2 workers, {ASGI_CONNECTIONS} connections, {options.rounds} "
        f"interleaved rounds of {options.duration:g} s",
        "",
        "| variant | path | × bare async view (median) | range | bare req/s (median) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for v in ASGI_VARIANTS:
        if v.kind == "reference":
            continue
        for path in (FIRST, REPLAY):
            values = ratios.get((v.name, path))
            if not values:
                continue
            bare = ratios.get(("async-bare", path), [0.0])
            lines.append(
                f"| {v.name} | {path} | {statistics.median(values):.2f} | "
                f"{min(values):.2f}–{max(values):.2f} | {statistics.median(bare):.0f} |"
            )
    return "\n".join(lines) + "\n"
