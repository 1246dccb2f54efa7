"""What a run measured (:class:`Results`, filled by the stages) and its markdown report:
the header (command, machine, method), then each section's tables in turn.

A run's measurements are summed up per variant and path (medians over rounds, ratios and
their spread, storms' effects and latencies), then written as tables: the steady paths,
the SQL each variant adds, the storms, the probes and memory, the in-process costs, the
growth, the targets (each a goal, what the run measured, and whether it was met) and the
per-round ratios.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.env import SERVER_SIDE_BINDING
from bench.variants import FIRST, REPLAY, VARIANTS, reference

if TYPE_CHECKING:
    from bench.costs import Costs
    from bench.growth import Growth
    from bench.load import Phase, Storm
    from bench.options import Options


@dataclass
class Probe:
    """What each caller got back for a primed key of one variant."""

    anonymous: int = 0
    bad_token: int = 0
    revoked_token: int = 0
    other_user_leak: bool = False

    @property
    def authenticates(self) -> bool:
        return (
            self.anonymous == 401
            and self.bad_token == 401
            and self.revoked_token == 401
            and not self.other_user_leak
        )


@dataclass
class Results:
    phases: dict[tuple[str, str], list[Phase]] = field(default_factory=dict)
    #: per round: a variant's req/s over the mean of the two reference runs beside it
    ratios: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    storms: dict[str, list[Storm]] = field(default_factory=dict)
    #: bursts of as many first requests (distinct keys) as a storm, at the same concurrency
    bursts: dict[str, list[Storm]] = field(default_factory=dict)
    probes: dict[str, Probe] = field(default_factory=dict)
    rss_mib: dict[str, float] = field(default_factory=dict)
    growth: Growth | None = None
    costs: Costs | None = None
    failures: list[str] = field(default_factory=list)
    machine: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def statuses(counts: dict[int, int]) -> str:
    """``201×40, 409×2``."""
    return ", ".join(f"{s}×{n}" for s, n in sorted(counts.items()))


def num(value: float | None, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals, or ``–`` when there is none."""
    return "–" if value is None else f"{value:.{digits}f}"


def int_range(values: list[int]) -> str:
    """``1`` when every value is 1, ``1–3`` otherwise, ``–`` for none."""
    if not values:
        return "–"
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}–{high}"


def with_spread(summary: Summary) -> str:
    """``0.71 (rounds 0.64–0.76)``: the median ratio and its per-round range."""
    if summary.ratio is None:
        return "–"
    if summary.spread is None or summary.rounds < 2:
        return f"{summary.ratio:.2f}"
    low, high = summary.spread
    return f"{summary.ratio:.2f} (rounds {low:.2f}–{high:.2f})"


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


def probes_and_memory(results: Results, names: list[str]) -> list[str]:
    by_name = {v.name: v for v in VARIANTS}
    lines = [
        "## Who gets a stored response; memory\n",
        "Probed against a primed key: the same request with no credentials, with a bad "
        "token, with a token revoked after priming, and from another user with the same key "
        "and body. A variant authenticates before replaying when the first three get 401 "
        "and the other user never gets the first user's response.\n",
        "| variant | what | no credentials | bad token | revoked token | other user gets "
        "the first user's response | authenticates before replay | peak worker RSS MiB |",
        "| --- | --- | ---: | ---: | ---: | --- | --- | ---: |",
    ]
    for name in names:
        v = by_name[name]
        p = results.probes.get(name)
        rss = results.rss_mib.get(name, 0.0)
        if p is None:
            lines.append(f"| {name} | {v.description} | | | | | | {rss:.1f} |")
        else:
            lines.append(
                f"| {name} | {v.description} | {p.anonymous} | {p.bad_token} | "
                f"{p.revoked_token} | {'yes' if p.other_user_leak else 'no'} | "
                f"{'yes' if p.authenticates else 'no'} | {rss:.1f} |"
            )
    lines += [
        "",
        "From the peers' code: django-idempotency-key looks the key up in its middleware's "
        "`process_view`, before DRF authenticates, and replays there; its stored entry is "
        "keyed by a hash of key, path, method, body and the raw `Authorization` header, so a "
        "different or missing header misses (the view then answers 401) but a revoked token "
        "still gets the replay. drf-idempotency's middleware replays before the view runs "
        "(before DRF authentication) and keys records by the key alone (fingerprint: method, "
        "path, body), so any caller with the key and body gets the stored response. Ours "
        "look the key up after DRF's `initial()` (authentication, permissions, throttles), "
        "scoped per user.\n",
    ]
    return lines


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


def growth_table(g: Growth) -> list[str]:
    lines = [
        "## Growth (in-process, DatabaseStore on PostgreSQL)\n",
        "| existing records | atomic first request: lookup + insert + commit, median ms "
        "(p99) | lease claim: INSERT … ON CONFLICT, median ms (p99) |",
        "| ---: | ---: | ---: |",
    ]
    for label, c in (
        (f"{g.small.records:,}", g.small),
        (f"{g.large.records:,}", g.large),
        ("0, right after purging the rest (dead rows not yet vacuumed)", g.after_purge),
    ):
        lines.append(
            f"| {label} | {c.atomic_ms:.3f} ({c.atomic_p99_ms:.3f}) | "
            f"{c.lease_ms:.3f} ({c.lease_p99_ms:.3f}) |"
        )
    pr = g.purge
    lines += [
        f"| ratio {g.large.records:,} / {g.small.records:,} | "
        f"{g.large.atomic_ms / g.small.atomic_ms:.2f} | "
        f"{g.large.lease_ms / g.small.lease_ms:.2f} |",
        "",
        f"Purge (`purge_expired_records`, default batch size): {pr.deleted:,} expired "
        f"records in {pr.seconds:.2f} s = **{pr.rows_per_second:,.0f} rows/s**, "
        f"{pr.batches} batches, longest batch {pr.longest_batch_seconds * 1000:.0f} ms. "
        f"Seeding took {g.seed_seconds:.1f} s.\n",
    ]
    return lines


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


def render(results: Results, options: Options) -> str:
    names = [v.name for v in VARIANTS if any(k[0] == v.name for k in results.phases)]
    summaries = summarize_paths(results, names)
    storms = {n: summarize_storms(b) for n, b in results.storms.items()}
    bursts = {n: summarize_storms(b) for n, b in results.bursts.items()}
    out = header(results, options)
    out += steady_paths(summaries)
    out += sql_added(names, summaries)
    out += storm_table(options.storm_size, names, summaries, storms, bursts)
    out += probes_and_memory(results, names)
    if results.costs is not None:
        out += costs_table(results.costs)
    if results.growth is not None:
        out += growth_table(results.growth)
    out += targets_table(results, summaries, storms, bursts)
    out += per_round(results, names, options.rounds)
    if results.failures:
        out += ["## Failures\n", *(f"- {failure}" for failure in results.failures), ""]
    return "\n".join(out)


def header(results: Results, options: Options) -> list[str]:
    """The title, the command, the machine and how the HTTP phases measure."""
    title = "Benchmark smoke run" if options.smoke else "Benchmark results"
    m = results.machine
    return [
        f"# {title}: django-idempotency vs a bare endpoint and peer libraries\n",
        f"Command: `{options.command}` ({options.rounds} interleaved round(s) of "
        f"{options.duration:g} s per variant and path; total {results.seconds:.0f} s).  ",
        f"Machine: {m.get('nproc')} CPUs, {m.get('cpu')}; PostgreSQL {m.get('postgresql')}, "
        f"Redis {m.get('redis')}; Python {m.get('python')}, Django {m.get('django')}, "
        f"DRF {m.get('drf')}; {m.get('wrk')}.  ",
        f"Load average before / after the HTTP phases: {m.get('load_before')} / "
        f"{m.get('load_after_load')} (the machine is shared: other work runs beside).\n",
        "Server: gunicorn, 2 sync workers per variant (each variant its own server), "
        "DEBUG off, persistent connections, one middleware (the SQL counter), "
        + (
            "psycopg with server-side binding and prepared statements "
            "(`server_side_binding`, `prepare_threshold` 5). "
            if SERVER_SIDE_BINDING
            else "psycopg with Django's default client-side binding. "
        )
        + "Load: wrk, 2 threads, 4 connections, run on the same machine. "
        "The reference (first request: `bare`; replay: `noop`) runs before, between and "
        "after the variants of every round; a ratio is the median over rounds of a run's req/s "
        "over the mean of the two reference runs beside it. SQL/req counts statements through "
        "Django's cursor on the server (BEGIN/COMMIT not included). *Good req/s* counts only "
        "the responses with the status the path expects (201 for a first request; the "
        "variant's replay status for a replay), and the ratios are taken on it: a fast error "
        "is not throughput.\n",
    ]
