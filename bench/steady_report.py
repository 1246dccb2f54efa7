"""The report's tables of the steady paths: throughput and latency per variant and path,
the SQL statements our layer adds, and every round's runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.cells import num, statuses
from bench.summaries import Summary, median
from bench.variants import FIRST, REPLAY, VARIANTS, reference

if TYPE_CHECKING:
    from bench.results import Results


def steady_paths(summaries: dict[tuple[str, str], Summary]) -> list[str]:
    lines = [
        "## Steady paths\n",
        "| variant | path | req/s | good req/s | p50 ms | p99 ms | ratio (good req/s) | SQL/req "
        "| statuses |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for (name, path), s in summaries.items():
        ref = f" × {reference(path)}" if s.ratio is not None else ""
        lines.append(
            f"| {name} | {path} | {s.rps:.0f} | {s.good_rps:.0f} | {s.p50_ms:.2f} | "
            f"{s.p99_ms:.2f} | {num(s.ratio)}{ref} | {num(s.sql, 1)} | "
            f"{statuses(s.statuses)} |"
        )
    lines.append("")
    return lines


def _difference(summary: Summary | None, base: Summary | None) -> float | None:
    if summary is None or base is None or summary.sql is None or base.sql is None:
        return None
    return summary.sql - base.sql


def sql_added(names: list[str], summaries: dict[tuple[str, str], Summary]) -> list[str]:
    """Our variants' SQL statements per request beyond the path's reference."""
    ours = {v.name for v in VARIANTS if v.ours}
    lines = [
        "## SQL statements our layer adds\n",
        "| variant | per first request (vs bare) | per replay (vs noop) |",
        "| --- | ---: | ---: |",
    ]
    bare, noop = summaries.get(("bare", FIRST)), summaries.get(("noop", REPLAY))
    for name in names:
        if name not in ours:
            continue
        first, replay = summaries.get((name, FIRST)), summaries.get((name, REPLAY))
        d_first = _difference(first, bare)
        d_replay = _difference(replay, noop)
        lines.append(f"| {name} | {num(d_first, 1)} | {num(d_replay, 1)} |")
    lines.append("")
    return lines


def per_round(results: Results, names: list[str], rounds: int) -> list[str]:
    """req/s of every run, round by round, with its ratio to the reference runs beside it."""
    lines = [
        "## Per round\n",
        "req/s of every run, round by round, and in brackets its ratio to the mean of the two "
        "reference runs beside it (for a reference: the median of its runs in that round). "
        "The spread shows how much the shared machine moved.\n",
        "| variant | path | " + " | ".join(f"round {i + 1}" for i in range(rounds)) + " |",
        "| --- | --- |" + " ---: |" * rounds,
    ]
    for path in (FIRST, REPLAY):
        for name in names:
            runs = results.phases.get((name, path))
            if not runs:
                continue
            if name == reference(path):  # several runs a round: their median
                per = max(1, len(runs) // rounds)
                chunks = [runs[i : i + per] for i in range(0, len(runs), per)]
                cells = [f"{median([r.rps for r in chunk]):.0f}" for chunk in chunks]
            else:
                ratios = results.ratios.get((name, path), [])
                cells = [
                    f"{run.rps:.0f}" + (f" ({ratios[i]:.2f})" if i < len(ratios) else "")
                    for i, run in enumerate(runs)
                ]
            lines.append(f"| {name} | {path} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines
