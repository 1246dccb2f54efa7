"""The markdown of :mod:`bench.breakdown`'s measurements."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.split import KINDS

if TYPE_CHECKING:
    from bench.breakdown_data import Path_, Price
    from bench.costs import RoundTrips

# -- the report --------------------------------------------------------------------------


def trip_price(trips: RoundTrips, ref: RoundTrips, prices: dict[str, Price]) -> tuple[str, float]:
    """The added round trips, spelt out, and their measured wall price."""
    sql = trips.sql - ref.sql
    tx = trips.transactions - ref.transactions
    rd = trips.redis - ref.redis
    price = (
        sql * prices["SELECT 1"].wall_us
        + tx * prices["BEGIN + COMMIT"].wall_us
        + rd * prices["RedisStore EVALSHA"].wall_us
    )
    parts = [f"{n:+d} {what}" for n, what in ((sql, "SQL"), (tx, "tx"), (rd, "Redis")) if n]
    return (", ".join(parts) or "0"), price


def markdown(
    cases: tuple[tuple[str, str, str], ...],
    results: dict[tuple[str, str], Path_],
    prices: dict[str, Price],
    per_event_us: tuple[float, float],
    load: str,
) -> str:
    lines: list[str] = []
    add = lines.append
    add("## Where the time goes, path by path (`python -m bench.breakdown`)\n")
    add(
        f"In-process, one request at a time, interleaved blocks; load average at the start "
        f"{load}. Every request is timed whole and inside its round trips (`bench/trips.py`: "
        "each SQL statement through Django's cursor, each COMMIT/ROLLBACK, each Redis "
        "command through redis-py, with the driver's work and the server's, a durable "
        "commit's WAL flush included). *Round trips* counts SQL statements (savepoints "
        "included), transactions (BEGIN and COMMIT/ROLLBACK: 2 round trips each) and Redis "
        "commands. *In the round trips* is the time added inside them, their measured price; "
        "**beyond the round trips** is the added time outside them (the median of each "
        "request's own difference): the layer's Python and what it calls besides the "
        "drivers. The target is ≤ 150 µs on a first request and ≤ 60 µs on a replay. *At "
        "probe prices* is what the added round trips would cost at the probes' prices "
        "below: a write and a durable commit cost far more than a `SELECT 1`.\n"
    )
    add("| probe | wall µs | request-thread CPU µs |")
    add("| --- | ---: | ---: |")
    for name, price in prices.items():
        add(f"| {name} | {price.wall_us:.0f} | {price.cpu_us:.0f} |")
    add("")
    add(
        "| path | reference | wall µs | added | round trips added | at probe prices µs | "
        "in the round trips µs | **beyond the round trips µs** | CPU µs | added | "
        "CPU in the round trips | **CPU beyond them** |"
    )
    add("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for variant, path, ref_name in cases:
        mine = results[(variant, path)]
        ref = _reference(results, ref_name)
        trips, price = trip_price(mine.trips, ref.trips, prices)
        add(
            f"| {variant} {path} | {ref_name} | {mine.wall_us:.0f} | "
            f"{mine.wall_us - ref.wall_us:+.0f} | {trips} | {price:.0f} | "
            f"{mine.in_trips_wall_us - ref.in_trips_wall_us:+.0f} | "
            f"**{beyond(mine, ref):+.0f}** | {mine.cpu_us:.0f} | "
            f"{mine.cpu_us - ref.cpu_us:+.0f} | "
            f"{mine.in_trips_cpu_us - ref.in_trips_cpu_us:+.0f} | "
            f"**{beyond(mine, ref, cpu=True):+.0f}** |"
        )
    add("")
    add(
        "In-process targets (issue 18): the time added beyond the added round trips' "
        "measured price, wall clock (the request thread's CPU time beside it).\n"
    )
    add("| path | beyond the round trips µs | CPU µs | target µs | met |")
    add("| --- | ---: | ---: | ---: | --- |")
    for variant, path, ref_name in cases:
        if variant == ref_name:
            continue
        mine, ref = results[(variant, path)], _reference(results, ref_name)
        wall, cpu = beyond(mine, ref), beyond(mine, ref, cpu=True)
        goal = 60 if path == "replay" else 150
        met = "yes" if wall <= goal else "**no**"
        add(f"| {variant} {path} | {wall:+.0f} | {cpu:+.0f} | ≤ {goal} | {met} |")
    add("")
    add(
        "The request thread's CPU time added, by the kind of code that ran it (µs per "
        f"request, the profiler hook's own cost taken off: {per_event_us[0]:.2f} µs per "
        f"Python call or return, {per_event_us[1]:.2f} µs per C call or return; what remains "
        "of its distortion shows as the difference between a row's total and the *CPU "
        "added* above). *sql*: "
        "Django's cursor and psycopg for each statement; *transaction*: atomic(), BEGIN, "
        "COMMIT, savepoints; *redis*: redis-py's command path; *cache client*: django-redis "
        "around it; *signals*: dispatch and receivers; *capture/replay*: "
        "`http/responses.py`; *encoding*: the stored format's JSON; *fingerprint/key*: "
        "`http/fingerprints.py`, `http/keys.py`; *layer*: the rest of `idempotency/`; "
        "*django/drf*: request handling, the view, rendering, the ORM.\n"
    )
    shown = [k for k in KINDS if k != "other"]
    add("| path | " + " | ".join(shown) + " | other | total |")
    add("| --- |" + " ---: |" * (len(shown) + 2))
    for variant, path, ref_name in cases:
        if variant == ref_name:
            continue
        mine = results[(variant, path)]
        ref = _reference(results, ref_name)
        diff = {k: mine.split[k] - ref.split[k] for k in KINDS}
        cells = " | ".join(f"{diff[k]:+.0f}" for k in shown)
        add(f"| {variant} {path} | {cells} | {diff['other']:+.0f} | {sum(diff.values()):+.0f} |")
    add("")
    add(
        "Function calls per request added, by kind (Python and C calls, counted by the same "
        "hook: unlike the times above they do not move with the machine's load, so they "
        "show work removed or added exactly):\n"
    )
    add("| path | " + " | ".join(shown) + " | other | total |")
    add("| --- |" + " ---: |" * (len(shown) + 2))
    for variant, path, ref_name in cases:
        if variant == ref_name:
            continue
        mine, ref = results[(variant, path)], _reference(results, ref_name)
        diff = {k: mine.calls[k] - ref.calls[k] for k in KINDS}
        cells = " | ".join(f"{diff[k]:+.0f}" for k in shown)
        add(f"| {variant} {path} | {cells} | {diff['other']:+.0f} | {sum(diff.values()):+.0f} |")
    add("")
    add("Absolute split of each reference (µs per request):\n")
    add("| reference | " + " | ".join(shown) + " | other | total |")
    add("| --- |" + " ---: |" * (len(shown) + 2))
    for name in sorted({ref for _v, _p, ref in cases}):
        ref = _reference(results, name)
        cells = " | ".join(f"{ref.split[k]:.0f}" for k in shown)
        add(f"| {name} | {cells} | {ref.split['other']:.0f} | {sum(ref.split.values()):.0f} |")
    return "\n".join(lines) + "\n"


def beyond(mine: Path_, ref: Path_, *, cpu: bool = False) -> float:
    """µs a path adds to its reference outside the round trips."""
    if cpu:
        return mine.outside_cpu_us - ref.outside_cpu_us
    return mine.outside_wall_us - ref.outside_wall_us


def _reference(results: dict[tuple[str, str], Path_], name: str) -> Path_:
    case = {"bare": ("bare", "first"), "noop": ("noop", "replay")}.get(name, (name, "call"))
    return results[case]
