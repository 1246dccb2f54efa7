"""``python -m chaos`` (``python3 dev.py chaos``): the sample under real faults.

Starts a private PostgreSQL cluster and a private Redis (AOF on) on free loopback
ports, then for each store variant the sample under gunicorn (4 workers), and runs
every scenario against it with retrying clients. Prints one table (and writes it to
``--output``, e.g. ``chaos/RESULTS.md``); exits 1 when any scenario broke an invariant.

    python -m chaos                       # everything (~10 min on 2 CPUs)
    python -m chaos --smoke               # the CI subset (~2 min)
    python -m chaos --variants redis --scenarios worker-sigkill,storms
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from chaos.app import VARIANTS, SampleServer
from chaos.client import Api, Outcome
from chaos.invariants import Checker, Verdict
from chaos.scenarios import FULL, SCENARIOS, SMOKE, SMOKE_SCENARIOS, Context, Result
from chaos.services import PrivatePostgres, PrivateRedis

HERE = Path(__file__).resolve().parent


@dataclass
class Row:
    variant: str
    scenario: str
    verdict: Verdict
    result: Result
    seconds: float

    @property
    def fivexx(self) -> int:
        return sum(n for status, n in self.verdict.transient.items() if status >= 500)

    @property
    def passed(self) -> bool:
        ok = self.verdict.passed(failures_allowed=self.result.failures_allowed)
        if self.result.no_5xx and self.fivexx:
            ok = False
        return ok and not self.result.extra_failures


def table(rows: list[Row]) -> str:
    head = (
        "| store | scenario | keys | calls | requests | 5xx / conn. errors seen | 2xx | "
        "gave up | applied twice | 2xx not applied | stray effects | answers differ | "
        "abandoned, retried | stuck in progress | balance ≠ ledger | result | fault |\n"
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|\n"
    )
    lines = []
    for row in rows:
        v = row.verdict
        conn = v.transient.get(0, 0)
        gave_up = "–" if row.result.failures_allowed else str(v.failed)
        notes = [row.result.note, *(n for n in v.notes if "task record" in n)]
        lines.append(
            f"| {row.variant} | {row.scenario} | {v.keys} | {v.calls} | {v.requests} "
            f"| {row.fivexx} / {conn} | {v.ok} | {gave_up} | {v.dupes} | {v.not_applied} "
            f"| {v.stray} | {v.diverging} | {v.abandoned} | {v.stuck} | {v.unbalanced} "
            f"| {'pass' if row.passed else '**FAIL**'} | {'; '.join(notes)} |"
        )
    return head + "\n".join(lines) + "\n"


def machine() -> str:
    cpus = os.cpu_count() or 0
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    system = f"{platform.system()} {platform.release()}"
    return f"{cpus} CPU {model} ({system}, Python {platform.python_version()})"


def run(variants: list[str], scenarios: list[str], smoke: bool) -> list[Row]:
    scale = SMOKE if smoke else FULL
    log_dir = Path(tempfile.mkdtemp(prefix="idem-chaos-logs-"))
    rows: list[Row] = []
    print(f"chaos: logs in {log_dir}", flush=True)
    with PrivatePostgres() as pg, PrivateRedis(aof=True) as redis:
        print(f"chaos: private PostgreSQL on :{pg.port}, Redis on :{redis.port}", flush=True)
        for number, variant in enumerate(variants):
            database = f"chaos_{variant.replace('-', '_')}"
            server = SampleServer(
                variant=variant,
                database_url=pg.create_database(database),
                redis_url=f"redis://127.0.0.1:{redis.port}/{number}",
                log_dir=log_dir,
            )
            server.prepare(users=8)
            server.start()
            api = Api(server.port, deadline=45.0)
            checker = Checker(server.database_url, server.redis_url, variant)
            ctx = Context(server, api, pg, redis, database, scale)
            history: list[Outcome] = []
            try:
                for name in scenarios:
                    started = time.monotonic()
                    result = SCENARIOS[name](ctx)
                    if not server.worker_pids():
                        server.start()  # the master itself never dies here, but be safe
                    accounts = [user.account for user in server.users]
                    history.extend(result.outcomes)
                    if checker.abandoned(any_lease=True):
                        time.sleep(server.lease + 0.5)  # let every live lease run out
                    # keys abandoned past their lease: retried once more, as a client would
                    abandoned = checker.abandoned_calls(history)
                    result.outcomes.extend(api.again(call) for call in abandoned)
                    verdict = checker.verify(result.outcomes, accounts)
                    verdict.abandoned = len(abandoned)
                    row = Row(variant, name, verdict, result, time.monotonic() - started)
                    rows.append(row)
                    print(table([row]).splitlines()[-1], flush=True)
                    for failure in result.extra_failures + verdict.notes[:5]:
                        print(f"    {failure}", flush=True)
            finally:
                server.stop()
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="the short CI subset")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--scenarios", default="")
    parser.add_argument("--output", default="", help="write the table here (default: print)")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    default = SMOKE_SCENARIOS if args.smoke else tuple(SCENARIOS)
    scenarios = [s for s in args.scenarios.split(",") if s] or list(default)
    unknown = [v for v in variants if v not in VARIANTS] + [
        s for s in scenarios if s not in SCENARIOS
    ]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)}")
    started = time.monotonic()
    rows = run(variants, scenarios, args.smoke)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    text = (
        f"Chaos run of {stamp} on {machine()}, {time.monotonic() - started:.0f} s "
        f"({'smoke' if args.smoke else 'full'}):\n\n{table(rows)}"
    )
    print("\n" + text)
    if args.output:
        Path(args.output).write_text(text)
    failed = [f"{r.variant}/{r.scenario}" for r in rows if not r.passed]
    if failed:
        print(f"chaos: FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    print("chaos: every scenario held")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
