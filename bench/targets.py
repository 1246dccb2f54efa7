"""The report's targets (issue 18's among them): each a goal, what the run measured, and
whether it was met."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.cells import int_range, statuses, with_spread
from bench.summaries import StormSummary, Summary
from bench.variants import FIRST, REPLAY, VARIANTS, reference

if TYPE_CHECKING:
    from bench.results import Results


def targets_table(
    results: Results,
    summaries: dict[tuple[str, str], Summary],
    storms: dict[str, StormSummary],
    bursts: dict[str, StormSummary],
) -> list[str]:
    lines = ["## Targets\n", "| target | measured | met |", "| --- | --- | --- |"]
    for target, measured, met in targets(results, summaries, storms, bursts):
        lines.append(f"| {target} | {measured} | {'yes' if met else '**no**'} |")
    lines.append("")
    return lines


def targets(
    results: Results,
    summaries: dict[tuple[str, str], Summary],
    storms: dict[str, StormSummary],
    bursts: dict[str, StormSummary],
) -> list[tuple[str, str, bool]]:
    rows: list[tuple[str, str, bool]] = []

    def ratio_row(name: str, path: str, goal: float) -> None:
        s = summaries.get((name, path))
        if s is None or s.ratio is None:
            return
        ref = reference(path)
        rows.append((f"{name} {path} ≥ {goal} × {ref}", with_spread(s), s.ratio >= goal))

    # issue 18's targets
    ratio_row("redis", FIRST, 0.88)
    ratio_row("db-atomic", FIRST, 0.80)
    ratio_row("db-atomic-flat", FIRST, 0.85)
    for name in ("redis", "db-redis-cache"):
        ratio_row(name, REPLAY, 0.85)
    for name in ("db-atomic", "db-optimistic", "db-lease"):
        ratio_row(name, REPLAY, 0.83)
    cached, plain = summaries.get(("db-redis-cache", FIRST)), summaries.get(("db-atomic", FIRST))
    if cached is not None and plain is not None and cached.ratio and plain.ratio:
        rows.append(
            (
                "db-redis-cache first ≥ db-atomic first (the cache costs a first request nothing)",
                f"{with_spread(cached)} vs {with_spread(plain)} × bare",
                cached.ratio >= plain.ratio,
            )
        )
    redis_first = summaries.get(("redis", FIRST))
    peer = summaries.get(("drf-idempotency-redis", FIRST))
    if redis_first is not None and peer is not None and redis_first.ratio and peer.ratio:
        rows.append(
            (
                "redis first ahead of drf-idempotency-redis",
                f"{with_spread(redis_first)} vs {with_spread(peer)} × bare",
                redis_first.ratio > peer.ratio,
            )
        )
    # ahead of a peer: compared by ratio to bare, each run against the bare runs beside it
    peers = {
        n: s.ratio
        for (n, p), s in summaries.items()
        if p == FIRST and n in _peer_names() and s.ratio is not None
    }
    if peers:
        best_name = max(peers, key=lambda n: peers[n])
        for name in ("db-atomic", "db-optimistic", "db-lease", "db-redis-cache"):
            s = summaries.get((name, FIRST))
            if s is not None and s.ratio is not None:
                rows.append(
                    (
                        f"{name} first request ahead of every peer",
                        f"{s.ratio:.2f} × bare vs {best_name} {peers[best_name]:.2f} × bare",
                        s.ratio > peers[best_name],
                    )
                )
    for name, st in storms.items():
        if name not in _our_names():
            continue
        ok_effects = all(e == 1 for e in st.effects)
        no_5xx = not any(s >= 500 or s == 0 for s in st.statuses)
        rows.append(
            (
                f"{name} storm: exactly one effect, no 5xx",
                f"effects {int_range(st.effects)}, {statuses(st.statuses)}",
                ok_effects and no_5xx,
            )
        )
        burst = bursts.get(name)
        if burst is not None:
            same = st.p99_ms / burst.p99_ms
            rows.append(
                (
                    f"{name} storm p99 ≤ 1.2 × p99 of a burst of 50 distinct first requests "
                    "(same concurrency)",
                    f"{st.p99_ms:.1f} ms = {same:.2f} ×",
                    same <= 1.2,
                )
            )
    g = results.growth
    if g is not None:
        for label, small, large in (
            ("atomic first request", g.small.atomic_ms, g.large.atomic_ms),
            ("lease claim", g.small.lease_ms, g.large.lease_ms),
        ):
            rows.append(
                (
                    f"{label} at {g.large.records:,} ≤ 1.1 × at {g.small.records:,}",
                    f"{large / small:.2f}",
                    large / small <= 1.1,
                )
            )
        pr = g.purge
        rows.append(
            ("purge ≥ 50k rows/s", f"{pr.rows_per_second:,.0f}", pr.rows_per_second >= 50_000)
        )
        rows.append(
            (
                "no purge batch holds locks > 1 s",
                f"{pr.longest_batch_seconds * 1000:.0f} ms",
                pr.longest_batch_seconds <= 1,
            )
        )
    return rows


def _peer_names() -> set[str]:
    return {v.name for v in VARIANTS if v.kind == "peer"}


def _our_names() -> set[str]:
    return {v.name for v in VARIANTS if v.ours}
