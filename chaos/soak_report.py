"""The soak's report: the pass criteria judged, a Markdown table, an SVG chart, the data."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PURGE_EVERY = 30.0


@dataclass
class Bucket:
    """What one bucket of the soak measured."""

    start: float  # seconds since the load began
    statuses: dict[str, int] = field(default_factory=dict)
    operations: int = 0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    rss_mib: float = 0.0
    worker_rss_max_mib: float = 0.0
    threads: int = 0
    sockets: int = 0
    records: int = 0
    in_progress: int = 0
    redis_keys: int = 0
    faults: list[str] = field(default_factory=list)
    renewals: int = 0  # keep-alive renewals so far
    renewal_late_max_ms: float = 0.0  # the latest of them: how long past its due time it started


#: Upper bounds of the renewal-lateness histogram, in fractions of the lease.
LATENESS = (0.01, 0.05, 0.1, 1 / 6, 1 / 3, 2 / 3, 1.0)


def renewal_histogram(renewals: Sequence[tuple[float, float]]) -> dict[str, int]:
    """How many renewals ended how late past their due time, in fractions of the lease."""
    counts = dict.fromkeys([f"<= {bound:.2f} lease" for bound in LATENESS] + ["> lease"], 0)
    for late, lease in renewals:
        label = next(
            (f"<= {bound:.2f} lease" for bound in LATENESS if late <= bound * lease), "> lease"
        )
        counts[label] += 1
    return counts


def criteria(
    buckets: Sequence[Bucket], end: dict[str, Any], ttl: float, bucket: float
) -> list[tuple[str, bool | None, str]]:
    """Each pass criterion: its name, whether it held (None: not measured), the figures."""
    rows: list[tuple[str, bool | None, str]] = []
    doubles = end["keys applied twice"]
    lost = end["2xx not applied"] + end["gave up"] + end["stuck in progress"]
    differ = end["answers that differ from the first"]
    rows.append(("zero doubles", doubles == 0, f"{doubles} keys applied twice"))
    rows.append(("zero lost answers or effects", lost == 0, f"{lost}"))
    rows.append(("zero mismatched answers", differ == 0, f"{differ} keys"))
    charges_ok = end["charges for them"] == end["payments answered 2xx"]
    rows.append(
        (
            "N payments gave N charges",
            charges_ok,
            f"{end['payments answered 2xx']} payments, {end['charges for them']} charges",
        )
    )
    unbalanced = end["balances not equal to their ledger"]
    rows.append(("balance equals ledger", unbalanced == 0, f"{unbalanced} accounts differ"))
    warm = buckets[1:] if len(buckets) > 2 else buckets
    first, last = warm[0].worker_rss_max_mib, warm[-1].worker_rss_max_mib
    growth = (last - first) / first * 100 if first else 0.0
    rows.append(
        (
            "worker RSS growth under 10 % after warm-up",
            growth < 10,
            f"largest worker {first:.0f} -> {last:.0f} MiB ({growth:+.1f} %)",
        )
    )
    window = ttl + PURGE_EVERY + bucket  # a record lives its TTL, then waits for a purge
    recent = sum(b.operations for b in buckets[-max(1, int(window // bucket) + 1) :])
    # the database's records (DatabaseStore), or Redis' keys (RedisStore, the cache)
    records = max(buckets[-1].records, buckets[-1].redis_keys)
    rows.append(
        (
            "records bounded by TTL and purge",
            0 <= records <= recent,
            f"{records} records or Redis keys at the end; {recent} operations in the last "
            f"{window:.0f} s",
        )
    )
    histogram: dict[str, int] = end["renewals"]
    renewals = sum(histogram.values())
    late = sum(n for label, n in histogram.items() if label in ("<= 0.67 lease",
               "<= 1.00 lease", "> lease"))  # fmt: skip
    rows.append(
        (
            "no renewal started later than a third of the lease",
            None if renewals == 0 else late == 0,
            f"{late} of {renewals} renewals" if renewals else "not measured (none renewed)",
        )
    )
    return rows


def markdown(buckets: Sequence[Bucket], end: dict[str, Any], judged: list[Any], head: str) -> str:
    lines = [head, "", "| criterion | result | figures |", "|---|---|---|"]
    for name, held, figures in judged:
        result = "not measured" if held is None else ("pass" if held else "**FAIL**")
        lines.append(f"| {name} | {result} | {figures} |")
    lines += [
        "",
        "| min | operations | p50 ms | p99 ms | workers' RSS MiB (largest) | threads | "
        "sockets | records (in progress) | Redis keys | renewals (latest, ms late) | "
        "answers by status | faults |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|",
    ]
    for b in buckets:
        statuses = ", ".join(f"{s or 'conn'}: {n}" for s, n in b.statuses.items())
        lines.append(
            f"| {b.start / 60:.1f} | {b.operations} | {b.p50_ms:.0f} | {b.p99_ms:.0f} | "
            f"{b.rss_mib:.0f} ({b.worker_rss_max_mib:.0f}) | {b.threads} | {b.sockets} | "
            f"{b.records} ({b.in_progress}) | {b.redis_keys} | "
            f"{b.renewals} ({b.renewal_late_max_ms:.0f}) | {statuses} | "
            f"{', '.join(b.faults) or '–'} |"
        )
    lines += ["", "End of the run:", ""]
    lines += [f"- {name}: {value}" for name, value in end.items()]
    return "\n".join(lines) + "\n"


def svg(buckets: Sequence[Bucket]) -> str:
    """Three panels over the run's minutes: operations and latency, memory, records."""
    width, panel, left = 720, 150, 60
    panels: list[tuple[str, list[tuple[str, str, Callable[[Bucket], float]]]]] = [
        (
            "operations per bucket (blue), p50 (green), p99 (red) ms; each line on its own scale",
            [
                ("ops", "#1f77b4", lambda b: b.operations),
                ("p50", "#2ca02c", lambda b: b.p50_ms),
                ("p99", "#d62728", lambda b: b.p99_ms),
            ],
        ),
        (
            "workers' RSS in MiB: all (blue), the largest worker (red)",
            [
                ("rss", "#1f77b4", lambda b: b.rss_mib),
                ("max", "#d62728", lambda b: b.worker_rss_max_mib),
            ],
        ),
        (
            "records in the database (blue), in progress (red), Redis keys (green)",
            [
                ("records", "#1f77b4", lambda b: b.records),
                ("in progress", "#d62728", lambda b: b.in_progress),
                ("redis", "#2ca02c", lambda b: b.redis_keys),
            ],
        ),
    ]
    height = len(panels) * (panel + 40) + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    span = max(1.0, buckets[-1].start if buckets else 1.0)  # bucket starts: 0 .. span
    for index, (title, series) in enumerate(panels):
        top = 20 + index * (panel + 40)
        out.append(f'<text x="{left}" y="{top - 6}">{title}</text>')
        out.append(
            f'<rect x="{left}" y="{top}" width="{width - left - 20}" height="{panel}" '
            'fill="none" stroke="#999"/>'
        )
        for line, (_name, colour, value) in enumerate(series):
            values = [max(0.0, value(b)) for b in buckets]
            peak = max(values, default=1.0) or 1.0
            points = " ".join(
                f"{left + (b.start / span) * (width - left - 20):.1f},"
                f"{top + panel - v / peak * (panel - 10):.1f}"
                for b, v in zip(buckets, values, strict=True)
            )
            out.append(f'<polyline points="{points}" fill="none" stroke="{colour}"/>')
            out.append(
                f'<text x="{width - 24}" y="{top + 14 + 12 * line}" fill="{colour}" '
                f'text-anchor="end">max {peak:.0f}</text>'
            )
        out.append(
            f'<text x="{left}" y="{top + panel + 14}">0 min</text>'
            f'<text x="{width - 20}" y="{top + panel + 14}" text-anchor="end">'
            f"{span / 60:.1f} min</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write(
    directory: Path, buckets: Sequence[Bucket], end: dict[str, Any], judged: list[Any], head: str
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "soak.md").write_text(markdown(buckets, end, judged, head))
    (directory / "soak.svg").write_text(svg(buckets))
    data = {"buckets": [asdict(b) for b in buckets], "end": end, "criteria": judged}
    (directory / "soak.json").write_text(json.dumps(data, indent=1, default=str))
