"""What each part of the layer really costs: ``python -m bench.ablation``.

A profiler slows call-heavy code more than the rest, so its split is a guide, not a
price. This measures by taking parts away instead: each path runs as built and with one
part replaced by a stand-in that costs next to nothing (the fingerprint by a constant,
the outcome signals by nothing, the response capture by a prebuilt record, the replayed
response by a prebuilt one, the stored format's JSON by constants), in interleaved
blocks in one process, so the machine's load moves both sides alike. A part's price is
the median difference, in wall and request-thread CPU µs per request.

Stand-ins change what is stored and answered, so they run on their own keys; nothing
here is a behaviour to rely on, only a measurement.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

Patch = list[tuple[Any, str, Any]]


def stand_ins() -> dict[str, Patch]:
    """Each part's stand-ins: (module or class, attribute, replacement)."""
    from django.http import HttpResponse

    from idempotency.http import atomic, flow, lease
    from idempotency.http.options import Policy
    from idempotency.stores import base
    from idempotency.stores.base import StoredResponse

    stored = StoredResponse(201, [("Content-Type", "application/json")], b'{"id": 1}')
    headers = '[["Content-Type", "application/json"]]'

    def no_send(*args: Any, **kwargs: Any) -> None:
        return None

    def constant_fingerprint(self: Any, request: Any) -> str:
        request.body  # noqa: B018 - the body is still read (DRF reads it anyway)
        return "0" * 64

    def prebuilt_capture(prepared: Any, response: Any) -> StoredResponse:
        return stored

    def prebuilt_replay(stored: Any) -> HttpResponse:
        response = HttpResponse(b'{"id": 1}', status=201, content_type="application/json")
        response["Idempotent-Replayed"] = "true"
        return response

    def constant_parts(cls: Any, status: Any, headers: Any, body: Any) -> StoredResponse:
        return stored

    return {
        "fingerprint": [(Policy, "get_fingerprint", constant_fingerprint)],
        "signals": [(module, "send", no_send) for module in (flow, atomic, lease)],
        "capture": [(module, "store_response", prebuilt_capture) for module in (atomic, lease)],
        "replay response": [(flow, "replay", prebuilt_replay)],
        "stored-format JSON": [
            (base.StoredResponse, "headers_json", lambda self: headers),
            (base.StoredResponse, "from_parts", classmethod(constant_parts)),
        ],
    }


@contextmanager
def applied(patch: Patch) -> Iterator[None]:
    saved = [(target, name, target.__dict__[name]) for target, name, _ in patch]
    try:
        for target, name, value in patch:
            setattr(target, name, value)
        yield
    finally:
        for target, name, value in saved:
            setattr(target, name, value)


CASES = (
    ("redis", "first"),
    ("redis", "replay"),
    ("db-atomic", "first"),
    ("db-atomic", "replay"),
    ("db-lease", "first"),
    ("db-lease", "replay"),
    ("db-redis-cache", "replay"),
)


def measure(token: str, *, rounds: int, per_block: int) -> dict[tuple[str, str, str], Any]:
    from django.core.handlers.wsgi import WSGIHandler

    from bench.profile import caller, keys

    app = WSGIHandler()
    parts = stand_ins()
    arms: list[tuple[str, str, str]] = [
        (variant, path, part) for variant, path in CASES for part in ("as built", *parts)
    ]
    calls = {
        arm: (caller(app, token, f"/bench/{arm[0]}/"), keys(arm[1])) for arm in arms
    }  # one key generator per arm: a replay key is primed under its own stand-ins
    walls: dict[tuple[str, str, str], list[float]] = {arm: [] for arm in arms}
    cpus: dict[tuple[str, str, str], list[float]] = {arm: [] for arm in arms}

    def run(arm: tuple[str, str, str], count: int, record: bool) -> None:
        call, next_key = calls[arm]
        block = [next_key() for _ in range(count)]
        with applied(parts.get(arm[2], [])):
            started_cpu, started = time.thread_time(), time.perf_counter()
            for key in block:
                call(key)
            wall, cpu = time.perf_counter() - started, time.thread_time() - started_cpu
        if record:
            walls[arm].append(wall / count * 1e6)
            cpus[arm].append(cpu / count * 1e6)

    for arm in arms:
        run(arm, 20, record=False)
    for _ in range(rounds):
        for arm in arms:
            run(arm, per_block, record=True)
    out: dict[tuple[str, str, str], Any] = {}
    for variant, path, part in arms:
        if part == "as built":
            continue
        built = (variant, path, "as built")
        wall = [a - b for a, b in zip(walls[built], walls[(variant, path, part)], strict=True)]
        cpu = [a - b for a, b in zip(cpus[built], cpus[(variant, path, part)], strict=True)]
        out[(variant, path, part)] = (statistics.median(wall), statistics.median(cpu))
    for variant, path in CASES:
        built = (variant, path, "as built")
        out[built] = (statistics.median(walls[built]), statistics.median(cpus[built]))
    return out


def markdown(results: dict[tuple[str, str, str], Any], load: str) -> str:
    parts = list(stand_ins())
    lines = [
        "## What each part costs, by taking it away (`python -m bench.ablation`)\n",
        f"In-process, interleaved blocks, one process; load average at the start {load}. "
        "Each cell: wall µs / request-thread CPU µs per request that the part costs (the "
        "path as built minus the path with that part replaced by a stand-in); the first "
        "columns are the path as built. Differences within about ±10 µs are noise.\n",
        "| path | as built wall / CPU µs | " + " | ".join(parts) + " |",
        "| --- | ---: |" + " ---: |" * len(parts),
    ]
    for variant, path in CASES:
        wall, cpu = results[(variant, path, "as built")]
        cells = " | ".join(
            "{:+.0f} / {:+.0f}".format(*results[(variant, path, part)]) for part in parts
        )
        lines.append(f"| {variant} {path} | {wall:.0f} / {cpu:.0f} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ablation", description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--per-block", type=int, default=20)
    parser.add_argument("--smoke", action="store_true", help="a few requests, to check it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.per_block = 1, 2
    from bench.servers import prepare_services
    from bench.variants import VARIANTS

    prepare_services([v for v in VARIANTS if v.kind != "peer"])
    from bench.profile import setup

    _app, token = setup()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(markdown(measure(token, rounds=args.rounds, per_block=args.per_block), load))
    return 0


if __name__ == "__main__":
    sys.exit(main())
