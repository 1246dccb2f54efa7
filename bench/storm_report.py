"""The report's storm table: effects, statuses and latency of many requests with one new
key, next to a burst of as many first requests."""

from __future__ import annotations

from bench.cells import int_range, num, statuses
from bench.summaries import StormSummary, Summary
from bench.variants import FIRST


def storm_table(
    storm_size: int,
    names: list[str],
    summaries: dict[tuple[str, str], Summary],
    storms: dict[str, StormSummary],
    bursts: dict[str, StormSummary],
) -> list[str]:
    lines = [
        f"## Storm: {storm_size} requests with one new key at once\n",
        "Each storm opens its connections first, then sends every request at once; the "
        "two workers take them in turn from the listen backlog, so latency includes "
        "queueing. `bare` has no idempotency: its effects show what a storm does "
        "unprotected.\n",
        "| variant | storms | effects per storm | balance change per storm | statuses (all storms) "
        "| p50 ms | p99 ms | burst p99 ms | p99 / burst p99 | p99 / steady first-request p99 "
        "| SQL per storm |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in names:
        st = storms.get(name)
        if st is None:
            continue
        own = summaries.get((name, FIRST))
        burst = bursts.get(name, st if name == "bare" else None)
        lines.append(
            f"| {name} | {st.storms} | {int_range(st.effects)} | {int_range(st.balance)} | "
            f"{statuses(st.statuses)} | {st.p50_ms:.1f} | {st.p99_ms:.1f} | "
            f"{num(burst.p99_ms if burst else None, 1)} | "
            f"{num(st.p99_ms / burst.p99_ms if burst else None)} | "
            f"{num(st.p99_ms / own.p99_ms if own else None, 1)} | "
            f"{st.sql_per_storm:.0f} |"
        )
    lines += [
        "",
        "*Burst*: as many requests at the same moment, each with its own key (first "
        "requests), against the same variant: the queueing a storm cannot avoid on two sync "
        "workers (for `bare`, which ignores keys, its storm is that burst). *Steady "
        "first-request p99* is the first-request path's, at 4 connections.\n",
    ]
    return lines
