"""The report's table of :mod:`bench.costs`: one request at a time, in-process, its time
and CPU beside the reference's, its round trips and what they alone cost."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.variants import reference

if TYPE_CHECKING:
    from bench.costs import Costs


def costs_table(c: Costs) -> list[str]:
    lines = [
        "## Where the time goes (in-process, one request at a time)\n",
        "The same views through Django's WSGI handler in the orchestrator process, no "
        "HTTP server and no concurrency, the variants alternating in blocks of 20 "
        f"requests. One PostgreSQL round trip (`SELECT 1` through Django's cursor) costs "
        f"**{c.postgres_round_trip:.0f} µs** here, one Redis round trip (a django-redis "
        f"`cache.get` miss) **{c.redis_round_trip:.0f} µs**.\n",
        "Round trips of one request, counted as they are sent: SQL statements through "
        "Django's cursors (savepoints included), 2 per transaction (its BEGIN and its "
        "COMMIT or ROLLBACK) and Redis commands. The floor column is what those extra "
        "round trips alone cost at the measured prices; the rest of *added* is Python.\n",
        "| variant | path | µs per request (median) | added vs reference µs | ratio | "
        "CPU µs (added) | SQL | transactions | Redis | round trips (+ vs reference) | "
        "floor of added µs | ratio floor |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (name, path), us in c.requests.items():
        base = c.requests.get((reference(path), path))
        added = f"{us - base:+.0f}" if base is not None else "–"
        ratio = f"{base / us:.2f}" if base else "–"
        cpu = c.cpu.get((name, path))
        cpu_base = c.cpu.get((reference(path), path))
        cpu_cell = f"{cpu:.0f} ({cpu - cpu_base:+.0f})" if cpu is not None and cpu_base else "–"
        rt = c.round_trips.get((name, path))
        ref_rt = c.round_trips.get((reference(path), path))
        if rt is None or ref_rt is None:
            lines.append(
                f"| {name} | {path} | {us:.0f} | {added} | {ratio} | {cpu_cell} | | | | | | |"
            )
            continue
        extra_sql = (rt.sql - ref_rt.sql) + 2 * (rt.transactions - ref_rt.transactions)
        floor = extra_sql * c.postgres_round_trip + (rt.redis - ref_rt.redis) * c.redis_round_trip
        best = f"{base / (base + floor):.2f}" if base else "–"
        lines.append(
            f"| {name} | {path} | {us:.0f} | {added} | {ratio} | {cpu_cell} | {rt.sql} | "
            f"{rt.transactions} | {rt.redis} | {rt.total} ({rt.total - ref_rt.total:+d}) | "
            f"{floor:.0f} | {best} |"
        )
    lines += [
        "",
        "*Ratio floor*: the best ratio the extra round trips allow even if the layer's "
        "Python cost nothing (reference µs over reference µs plus the floor). *CPU µs*: "
        "the request thread's CPU time (user and kernel) per request: the layer's Python, "
        "the drivers, and the kernel's work for each round trip's socket calls, which on "
        "this machine grows with every statement sent; the rest of *added* is waiting.\n",
    ]
    return lines
