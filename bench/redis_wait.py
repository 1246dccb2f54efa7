"""What a Redis store's ``wait_replicas`` costs: RedisStore claim + complete on a Redis Cluster.

    python -m bench.redis_wait            # 5 interleaved rounds of 3 s per variant
    python -m bench.redis_wait --smoke    # 1 round of 0.5 s (CI)

Starts a private Redis Cluster (3 primaries, 3 replicas, loopback, free ports), then
runs one request's store work (a claim, then the completion of a small response) in a
loop, without and with ``WAIT 1`` after each write, interleaving the variants round by
round so both see the same machine load. Reports cycles per second and latency
percentiles for 1 and 4 client threads, and writes ``bench/RESULTS_WAIT.md`` (not in
smoke mode).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS_WAIT.md"


def _configure(url: str) -> None:
    """Two stores on the cluster ``url`` names, configured as a project would
    (``IDEMPOTENCY["STORES"]``): without ``WAIT`` and with ``WAIT 1``."""
    import django
    from django.conf import settings

    redis = {"BACKEND": "idempotency.stores.redis.RedisStore", "LOCATION": url}
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "idempotency"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        # the records' tags (idempotency.stores.records) are keyed by it
        SECRET_KEY="bench-only-not-a-secret",
        IDEMPOTENCY={
            "STORES": {
                "no WAIT": {**redis, "OPTIONS": {"cluster": True}},
                "WAIT 1": {**redis, "OPTIONS": {"cluster": True, "wait_replicas": 1}},
            }
        },
        USE_TZ=True,
    )
    django.setup()


def _cycles(store: Any, seconds: float, threads: int) -> list[float]:
    """Latencies (s) of claim + complete cycles run by ``threads`` threads for ``seconds``;
    raises when a cycle failed (a claim not owned, a completion not stored, an error)."""
    from idempotency.stores.base import StoredResponse

    response = StoredResponse(201, [("Content-Type", "application/json")], b'{"id": 1}')
    latencies: list[float] = []
    errors: list[BaseException] = []
    guard = threading.Lock()
    deadline = time.perf_counter() + seconds

    def run() -> None:
        mine: list[float] = []
        try:
            while time.perf_counter() < deadline:
                key = uuid.uuid4().hex
                started = time.perf_counter()
                claim = store.claim("bench", key, fingerprint="f", lease=30, ttl=60)
                if not claim.owned:
                    raise RuntimeError(f"a new key's claim was not owned: {claim}")
                if not store.complete("bench", key, fence=claim.fence, response=response, ttl=60):
                    raise RuntimeError("a claimed key's completion was not stored")
                mine.append(time.perf_counter() - started)
        except BaseException as exc:
            with guard:
                errors.append(exc)
        with guard:
            latencies.extend(mine)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        raise RuntimeError(f"{len(errors)} of {threads} threads failed") from errors[0]
    if not latencies:
        raise RuntimeError(f"no cycle finished in {seconds} s")
    return latencies


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="1 round of 0.5 s, no report")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.smoke else 5)
    seconds = args.seconds or (0.5 if args.smoke else 3.0)

    sys.path.insert(0, str(ROOT))
    from tests.scale.servers import RedisClusterServer

    cluster = RedisClusterServer().start()
    try:
        _configure(cluster.url)
        from idempotency.stores.base import stores

        variants = {name: stores[name] for name in ("no WAIT", "WAIT 1")}
        results: dict[tuple[str, int], list[list[float]]] = {}
        for _round in range(rounds):
            for threads in (1, 4):
                for name, store in variants.items():
                    latencies = _cycles(store, seconds, threads)
                    results.setdefault((name, threads), []).append(latencies)
    finally:
        cluster.stop()

    lines = [
        "| variant | threads | cycles/s (median of rounds) | p50 ms | p99 ms | cost vs no WAIT |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    base: dict[int, float] = {}
    for (name, threads), runs in results.items():
        rate = statistics.median(len(run) / seconds for run in runs)
        every = [x for run in runs for x in run]
        p50, p99 = _percentile(every, 0.5) * 1000, _percentile(every, 0.99) * 1000
        if name == "no WAIT":
            base[threads] = p50
        cost = f"+{p50 - base[threads]:.3f} ms p50" if name != "no WAIT" else "-"
        lines.append(f"| {name} | {threads} | {rate:.0f} | {p50:.3f} | {p99:.3f} | {cost} |")
    table = "\n".join(lines)
    print(table)
    if not args.smoke:
        RESULTS.write_text(
            "# The cost of WAIT: RedisStore claim + complete on a Redis Cluster\n\n"
            f"Command: `python -m bench.redis_wait` ({rounds} interleaved rounds of "
            f"{seconds:g} s per variant). One cycle = one request's store work: a claim "
            "script, then a completion script (each followed by `WAIT 1 500` in the WAIT "
            "variant). Redis Cluster of 3 primaries and 3 replicas on loopback; "
            f"{os.cpu_count()} CPUs shared with other work; Python "
            f"{platform.python_version()}.\n\n{table}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
