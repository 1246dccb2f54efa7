"""A run's measurements summed up per variant and path: medians over rounds, ratios and
their spread, storms' effects and latencies."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.variants import FIRST, REPLAY, VARIANTS, reference

if TYPE_CHECKING:
    from bench.load import Storm
    from bench.results import Results


@dataclass(frozen=True)
class Summary:
    rps: float
    good_rps: float
    p50_ms: float
    p99_ms: float
    ratio: float | None
    sql: float | None
    statuses: dict[int, int]
    rounds: int
    #: lowest and highest per-round ratio (the spread of the median)
    spread: tuple[float, float] | None = None


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def merged_statuses(counts: Iterable[dict[int, int]]) -> dict[int, int]:
    """status -> responses, over several runs' counts."""
    merged: dict[int, int] = {}
    for count in counts:
        for status, n in count.items():
            merged[status] = merged.get(status, 0) + n
    return merged


def summarize(results: Results, name: str, path: str) -> Summary | None:
    phases = results.phases.get((name, path))
    if not phases:
        return None
    # each ratio is against the reference runs right before and after the variant's run,
    # which cancels the machine's drift better than a ratio of medians
    ratios = [1.0] if name == reference(path) else results.ratios.get((name, path), [])
    sql = sum(p.sql for p in phases)
    counted = sum(p.sql_counted for p in phases)
    variant = next(v for v in VARIANTS if v.name == name)
    expected = variant.expected_status(path)
    return Summary(
        rps=median([p.rps for p in phases]),
        good_rps=median([p.good_rps(expected) for p in phases]),
        p50_ms=median([p.p50_ms for p in phases]),
        p99_ms=median([p.p99_ms for p in phases]),
        ratio=median(ratios) if ratios else None,
        sql=sql / counted if counted else None,
        statuses=merged_statuses(p.statuses for p in phases),
        rounds=len(phases),
        spread=(min(ratios), max(ratios)) if ratios else None,
    )


def summarize_paths(results: Results, names: list[str]) -> dict[tuple[str, str], Summary]:
    """(variant, path) -> its summary, first requests then replays, in ``names``' order."""
    summaries: dict[tuple[str, str], Summary] = {}
    for path in (FIRST, REPLAY):
        for name in names:
            s = summarize(results, name, path)
            if s is not None:
                summaries[(name, path)] = s
    return summaries


@dataclass(frozen=True)
class StormSummary:
    storms: int
    effects: list[int]
    balance: list[int]
    statuses: dict[int, int]
    p50_ms: float
    p99_ms: float
    sql_per_storm: float


def summarize_storms(bursts: list[Storm]) -> StormSummary:
    latencies = sorted(r.seconds * 1000 for b in bursts for r in b.replies)
    p99 = latencies[max(0, int(len(latencies) * 0.99) - 1)] if latencies else float("nan")
    return StormSummary(
        storms=len(bursts),
        effects=[b.effects for b in bursts],
        balance=[b.balance_change for b in bursts],
        statuses=merged_statuses(b.statuses for b in bursts),
        p50_ms=median(latencies),
        p99_ms=p99,
        sql_per_storm=statistics.mean(b.sql for b in bursts) if bursts else 0.0,
    )
