"""The benchmark run: servers up, interleaved load rounds, storms, probes, growth, report.

``python -m bench`` (full run, writes ``bench/RESULTS.md``), ``python -m bench --smoke``
(seconds per variant, exits non-zero when anything breaks), ``--rounds N --duration S``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import env
from bench.load import LoadError, Phase, Reply, Storm, post, run_wrk, storm, wrk_path
from bench.servers import Server, ServerError, prepare_services
from bench.variants import FIRST, REPLAY, STORM, VARIANTS, Variant, reference

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Options:
    smoke: bool
    rounds: int
    duration: float
    storm_size: int
    storms_per_round: int
    growth_small: int
    growth_large: int
    growth_samples: int
    warmup: float
    cost_blocks: int
    peers: bool
    growth: bool
    variants: frozenset[str] | None
    output: Path | None
    command: str


def parse(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a seconds-long run of the same machinery; exit 1 on any failure",
    )
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 6; smoke 1)")
    parser.add_argument(
        "--duration",
        type=float,
        help="seconds per variant and path in each round (default 2; smoke 1)",
    )
    parser.add_argument(
        "--storm-size",
        type=int,
        default=50,
        help="concurrent requests with one key in a storm (default 50)",
    )
    parser.add_argument("--storms", type=int, help="storms per variant and round (default 1)")
    parser.add_argument(
        "--growth",
        default=None,
        metavar="SMALL,LARGE",
        help="existing records (default 10000,1000000; smoke 1000,10000)",
    )
    parser.add_argument("--growth-samples", type=int, help="first requests timed per size")
    parser.add_argument("--no-growth", action="store_true", help="skip the growth measurements")
    parser.add_argument(
        "--no-costs", action="store_true", help="skip the in-process per-request costs"
    )
    parser.add_argument("--no-peers", action="store_true", help="leave the peer libraries out")
    parser.add_argument(
        "--variants",
        metavar="A,B,...",
        help="measure only these variants (the references always run)",
    )
    parser.add_argument(
        "--output", type=Path, help="markdown report (default bench/RESULTS.md; smoke: none)"
    )
    args = parser.parse_args(argv)
    smoke = bool(args.smoke)
    small, large = (1_000, 10_000) if smoke else (10_000, 1_000_000)
    if args.growth:
        small, large = (int(n) for n in args.growth.split(","))
    output = args.output if args.output is not None else (None if smoke else RESULTS)
    return Options(
        smoke=smoke,
        rounds=args.rounds or (1 if smoke else 6),
        duration=args.duration or (1.0 if smoke else 2.0),
        storm_size=args.storm_size,
        storms_per_round=args.storms or 1,
        growth_small=small,
        growth_large=large,
        growth_samples=args.growth_samples or (100 if smoke else 2000),
        warmup=0.0 if smoke else 1.0,
        cost_blocks=0 if args.no_costs else (1 if smoke else 25),
        peers=not args.no_peers,
        growth=not args.no_growth,
        variants=frozenset(args.variants.split(",")) if args.variants else None,
        output=output,
        command=(
            "python -m bench " + shlex.join(argv if argv is not None else sys.argv[1:])
        ).strip(),
    )


# -- services and data ---------------------------------------------------------------------


def setup_django() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()


@dataclass
class Users:
    token: str  # the caller of every load phase
    other_token: str  # another user: must never see the first one's responses
    revoked_user: Any


def reset_data() -> Users:
    """Empty tables, fresh users with tokens and accounts at balance 0."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from rest_framework.authtoken.models import Token

    from bench.benchapp.models import Account

    tables = [
        "benchapp_entry",
        "idempotency_idempotencyrecord",
        "drf_idempotency_idempotencyrecord",
    ]
    existing = set(connection.introspection.table_names())
    with connection.cursor() as cursor:
        for table in tables:
            if table in existing:
                cursor.execute(f"TRUNCATE {table}")
    user_model = get_user_model()
    tokens = []
    for name in ("bench", "bench-other", "bench-revoked"):
        user, _ = user_model.objects.get_or_create(username=name)
        Account.objects.update_or_create(user=user, defaults={"balance": 0})
        Token.objects.filter(user=user).delete()
        tokens.append(Token.objects.create(user=user))
    return Users(tokens[0].key, tokens[1].key, tokens[2].user)


def effects() -> tuple[int, int]:
    """(entries, balance) of the load user: what the view bodies have done so far."""
    from bench.benchapp.models import Account, Entry

    account = Account.objects.get(user__username="bench")
    return Entry.objects.filter(account=account).count(), int(account.balance)


# -- measurements --------------------------------------------------------------------------


@dataclass
class Probe:
    """Who gets a stored response: checked against a primed key of each variant."""

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
    growth: Any = None
    costs: Any = None
    breakdown: str = ""
    failures: list[str] = field(default_factory=list)
    machine: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def expected_status(variant: Variant, path: str) -> int:
    return variant.replay_status if path == REPLAY else 201


def check_phase(results: Results, variant: Variant, path: str, phase: Phase) -> None:
    if not variant.ours and variant.kind != "reference":
        return
    expected = expected_status(variant, path)
    unexpected = {s: n for s, n in phase.statuses.items() if s != expected}
    if unexpected or phase.requests == 0:
        results.failures.append(f"{variant.name} {path}: statuses {phase.statuses}")
    errors = {k: n for k, n in phase.errors.items() if n and k != "status"}
    if errors:
        log(f"warning: {variant.name} {path}: wrk socket errors {errors}")


def check_storm(results: Results, variant: Variant, burst: Storm) -> None:
    if not variant.ours:
        return
    if burst.effects != 1:
        results.failures.append(f"{variant.name} storm: {burst.effects} effects (must be 1)")
    bad = {s: n for s, n in burst.statuses.items() if s >= 500 or s == 0}
    if bad:
        results.failures.append(f"{variant.name} storm: statuses {burst.statuses}")


def prime(server: Server, variant: Variant, token: str, key: str) -> Reply:
    reply = post(server.port, variant.path, token=token, key=key)
    if not 200 <= reply.status < 300:
        raise ServerError(
            f"{variant.name}: priming request answered {reply.status}: {reply.body[:300]!r}\n"
            f"{server.log_tail()}"
        )
    return reply


def probe(server: Server, variant: Variant, users: Users) -> Probe:
    """Replays to an anonymous caller, a bad token, a revoked token, another user?"""
    from rest_framework.authtoken.models import Token

    key = f"probe-{variant.name}-{uuid.uuid4().hex[:8]}"
    first = prime(server, variant, users.token, key)
    result = Probe()
    result.anonymous = post(server.port, variant.path, token=None, key=key).status
    result.bad_token = post(server.port, variant.path, token="0" * 40, key=key).status
    other = post(server.port, variant.path, token=users.other_token, key=key)
    result.other_user_leak = other.body == first.body
    Token.objects.filter(user=users.revoked_user).delete()
    revoked = Token.objects.create(user=users.revoked_user)
    revoked_key = f"{key}-revoked"
    prime(server, variant, revoked.key, revoked_key)
    old = revoked.key
    revoked.delete()
    result.revoked_token = post(server.port, variant.path, token=old, key=revoked_key).status
    return result


def machine_facts() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts = {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
    }
    try:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            row = cursor.fetchone()
            facts["postgresql"] = str(row[0]) if row else "?"
    except Exception as exc:  # noqa: BLE001 - a fact we report, not a failure
        facts["postgresql"] = f"? ({exc})"
    try:
        import redis

        facts["redis"] = str(redis.Redis.from_url(env.REDIS_URL).info("server")["redis_version"])
    except Exception as exc:  # noqa: BLE001
        facts["redis"] = f"? ({exc})"
    import django
    import rest_framework

    facts["django"] = django.get_version()
    facts["drf"] = rest_framework.VERSION
    try:
        wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True)
        facts["wrk"] = (wrk.stdout or wrk.stderr).split("[", 1)[0].strip()
    except OSError:
        facts["wrk"] = "?"
    return facts


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def rotate(items: list[Variant], by: int) -> list[Variant]:
    if not items:
        return items
    by %= len(items)
    return items[by:] + items[:by]


def run(options: Options) -> Results:
    started = time.perf_counter()
    results = Results()
    variants = [
        v
        for v in VARIANTS
        if (v.kind != "peer" or (options.peers and v.installed))
        and (options.variants is None or v.name in options.variants or v.kind == "reference")
    ]
    wrk_path()  # fail before anything starts when wrk is missing
    skipped = [v.name for v in VARIANTS if v.kind == "peer" and not v.installed]
    if skipped:
        log(f"peers not installed, left out: {', '.join(skipped)}")
    log("preparing PostgreSQL, Redis and migrations")
    prepare_services(variants)
    setup_django()
    users = reset_data()
    results.machine = machine_facts()
    results.machine["load_before"] = loadavg()
    servers = {v.name: Server(v.name, v.settings) for v in variants}
    logs = Path(tempfile.mkdtemp(prefix="idem-bench-"))
    try:
        log(f"starting {len(servers)} gunicorn servers (logs in {logs})")
        for server in servers.values():
            server.start(logs)
        for server in servers.values():
            server.wait_ready()
        run_id = uuid.uuid4().hex[:8]
        replay_keys = {v.name: f"replay-{v.name}-{run_id}" for v in variants if REPLAY in v.paths}
        for v in variants:
            if v.name in replay_keys:
                prime(servers[v.name], v, users.token, replay_keys[v.name])

        def phase(v: Variant, path: str, seconds: float, tag: str) -> Phase:
            url = servers[v.name].base_url + v.path
            if path == FIRST:
                result = run_wrk(
                    url,
                    mode="unique",
                    token=users.token,
                    key=f"first-{v.name}-{run_id}-{tag}",
                    seconds=seconds,
                )
            else:
                result = run_wrk(
                    url, mode="fixed", token=users.token, key=replay_keys[v.name], seconds=seconds
                )
            servers[v.name].check_alive()
            return result

        if options.warmup:
            log("warming up every variant")
            for v in variants:
                for path in (FIRST, REPLAY):
                    if path in v.paths:
                        phase(v, path, options.warmup, "warmup")
        for round_no in range(options.rounds):
            for path in (FIRST, REPLAY):
                ref = next(v for v in variants if v.name == reference(path))
                order = rotate([v for v in variants if path in v.paths and v is not ref], round_no)
                log(
                    f"round {round_no + 1}/{options.rounds} {path}: {ref.name} between each of "
                    + " ".join(v.name for v in order)
                )
                # the reference runs before, between and after the variants: each variant's
                # ratio is taken against the two reference runs next to it
                before = phase(ref, path, options.duration, f"r{round_no}-ref0")
                results.phases.setdefault((ref.name, path), []).append(before)
                check_phase(results, ref, path, before)
                for i, v in enumerate(order):
                    result = phase(v, path, options.duration, f"r{round_no}")
                    results.phases.setdefault((v.name, path), []).append(result)
                    check_phase(results, v, path, result)
                    if options.smoke and i < len(order) - 1:
                        after = before  # a smoke runs the reference only around the variants
                    else:
                        after = phase(ref, path, options.duration, f"r{round_no}-ref{i + 1}")
                        results.phases.setdefault((ref.name, path), []).append(after)
                        check_phase(results, ref, path, after)
                    ref_status = expected_status(ref, path)
                    neighbours = (before.good_rps(ref_status) + after.good_rps(ref_status)) / 2
                    if neighbours:
                        results.ratios.setdefault((v.name, path), []).append(
                            result.good_rps(expected_status(v, path)) / neighbours
                        )
                    before = after
        log(
            f"storms: {options.storm_size} requests with one key at once, and as many with "
            "distinct keys (a burst of first requests)"
        )
        stormers = [v for v in variants if STORM in v.paths]
        for round_no in range(options.rounds):
            for _ in range(options.storms_per_round):
                for v in rotate(stormers, round_no):
                    port = servers[v.name].port
                    before_effects = effects()
                    key = f"storm-{v.name}-{uuid.uuid4().hex}"
                    burst = storm(port, v.path, token=users.token, key=key, size=options.storm_size)
                    after_effects = effects()
                    burst.effects = after_effects[0] - before_effects[0]
                    burst.balance_change = after_effects[1] - before_effects[1]
                    results.storms.setdefault(v.name, []).append(burst)
                    check_storm(results, v, burst)
                    if v.kind != "reference":  # bare ignores keys: its storm is such a burst
                        distinct = storm(
                            port, v.path, token=users.token, key=key + "-distinct",
                            size=options.storm_size, distinct=True,
                        )  # fmt: skip
                        results.bursts.setdefault(v.name, []).append(distinct)
                    servers[v.name].check_alive()
        log("probes: who gets a stored response")
        for v in variants:
            if REPLAY in v.paths and v.kind != "reference":
                results.probes[v.name] = probe(servers[v.name], v, users)
        for name, server in servers.items():
            results.rss_mib[name] = server.peak_worker_rss_mib()
    finally:
        for server in servers.values():
            server.stop()
    results.machine["load_after_load"] = loadavg()
    if options.cost_blocks:
        from bench import costs

        log("costs: one request at a time, in-process")
        results.costs = costs.measure(users.token, blocks=options.cost_blocks)
        from bench import breakdown

        log("breakdown: where each path's time goes, by kind of code")
        results.breakdown = breakdown.report(users.token, smoke=options.smoke)
    if options.growth:
        from bench import growth

        log(f"growth: {options.growth_small:,} vs {options.growth_large:,} records")
        results.growth = growth.measure(
            small=options.growth_small,
            large=options.growth_large,
            samples=options.growth_samples,
            log=log,
        )
        purge = results.growth.purge
        if purge.deleted < options.growth_large:
            results.failures.append(
                f"purge deleted {purge.deleted} of at least {options.growth_large} records"
            )
    results.seconds = time.perf_counter() - started
    return results


def _chart(report: str, options: Options) -> Path | None:
    """The SVG chart of the ratios, beside the report (a smoke run draws it to a temp file)."""
    from bench.chart import write_chart

    if options.output is not None:
        return write_chart(report, options.output.with_suffix(".svg"))
    with tempfile.TemporaryDirectory() as tmp:
        chart = write_chart(report, Path(tmp) / "smoke.svg")
        if not chart.read_bytes().lstrip().startswith(b"<?xml"):
            raise RuntimeError("the chart is not an SVG document")
    return None


def main(argv: list[str] | None = None) -> int:
    from bench.report import render

    options = parse(argv)
    # a SIGTERM (timeout, CI) unwinds like Ctrl-C, so the servers are stopped
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        results = run(options)
    except (ServerError, LoadError) as exc:
        log(f"FAILED: {exc}")
        return 2
    except Exception as exc:
        log(f"FAILED: {type(exc).__name__}: {exc}")
        raise
    report = render(results, options)
    print(report)
    if options.output is not None:
        options.output.write_text(report)
        log(f"report written to {options.output}")
    chart = _chart(report, options)
    if chart is not None:
        log(f"chart written to {chart}")
    if results.failures:
        log("FAILED:\n  " + "\n  ".join(results.failures))
        return 1
    log(f"done in {results.seconds:.0f} s")
    return 0
