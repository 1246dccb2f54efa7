"""``python -m chaos.soak`` (``python3 dev.py soak``): the sample for minutes under faults.

The chaos suite's services (a private PostgreSQL and Redis with AOF, the sample under
gunicorn with 4 workers) carry mixed traffic for ``--minutes``: deposits, order-and-pay
flows and replays (a completed key sent again), from clients of ``idempotency.client``
(retrying, one key per operation) that reach the server through a fault proxy dropping
or resetting a few requests. On a schedule a worker is SIGKILLed, the database sessions
are ended (``pg_terminate_backend``), Redis is SIGKILLed and restarted (AOF), and Redis
is frozen for 3 s; the purge command runs every 30 s against a short TTL.

Each bucket (``--bucket`` seconds, a minute by default) records answers by status, the
operations' p50 and p99, the workers' RSS, threads and open sockets, the records in the
database and the keys in Redis. At the end: every payment gave one charge, every balance
equals its ledger, no answer of a key differed from its first, nothing is stuck. The
report (``soak.md``, ``soak.svg``, ``soak.json``) goes to ``--output``.

    python -m chaos.soak --minutes 2               # the smoke
    python -m chaos.soak --minutes 30 --variant redis --output docs/soak

Keep-alive renewals (lease mode: the ``redis`` variant, the default) are timed in the
workers (:mod:`chaos.soak_gunicorn`): how late each successful one started past its due
time (the library's scheduling under load) and how late it ended (the store's answer
included: a frozen Redis holds it), as histograms in fractions of the lease, and how many
failed (the store frozen or down: retried on the next tick) or were refused. Renewals run
only for requests longer than a third of the lease: under this load, those caught by a
fault (Redis frozen, restarted).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.app import ROOT, VARIANTS, ChaosUser, SampleServer
from chaos.client import Outcome
from chaos.invariants import Checker
from chaos.services import PrivatePostgres, PrivateRedis
from chaos.soak_report import Bucket, criteria, renewal_histogram, write
from idempotency.client import DeadlineExceeded, IdempotentClient, RetryEvent, RetryPolicy
from tests.support.proxy import FaultProxy

FAULTS = ("worker-sigkill", "pg-terminate", "redis-restart", "redis-freeze")


@dataclass
class Run:
    """The load's outcomes and timings, shared by the client threads."""

    outcomes: list[Outcome] = field(default_factory=list)
    timings: list[tuple[float, float]] = field(default_factory=list)  # (done at, seconds)
    statuses: list[tuple[float, int]] = field(default_factory=list)  # (at, status; 0 error)
    replays: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class Soak:
    def __init__(self, options: argparse.Namespace, pg: PrivatePostgres, redis: PrivateRedis):
        self.options = options
        self.pg, self.redis = pg, redis
        self.database = f"soak_{options.variant.replace('-', '_')}"
        self.server = SampleServer(
            variant=options.variant,
            database_url=pg.create_database(self.database),
            redis_url=f"{redis.url}/0",
            log_dir=Path(tempfile.mkdtemp(prefix="idem-soak-logs-")),
        )
        self.ttl = options.ttl
        self.renewals = self.server.log_dir / "renewals"
        self.server.lease = options.lease
        self._sample_env = self.server.env
        self.server.env = self.env  # type: ignore[method-assign]
        self.run = Run()
        self.faults: list[tuple[float, str]] = []
        self.stop = threading.Event()
        self.began = 0.0
        rng = random.Random(7)
        # a lossy network: the server acted and the answer is lost, or nothing arrived
        self.proxy = FaultProxy(
            self.server.port,
            lambda _identity, _attempt: rng.choices(["pass", "drop", "reset"], [95, 3, 2])[0],
        )

    def env(self) -> dict[str, str]:
        """The sample's environment, with the soak's short TTL and its workers' timing of
        keep-alive renewals (:mod:`chaos.soak_gunicorn`)."""
        return {
            **self._sample_env(),
            "IDEMPOTENCY_TTL": str(self.ttl),
            "GUNICORN_CMD_ARGS": "--config python:chaos.soak_gunicorn",
            "SOAK_RENEWALS": str(self.renewals),
        }

    def lateness(
        self, outcome: str = "renewed", *, ended: bool = False
    ) -> list[tuple[float, float]]:
        """The renewals so far that ended with ``outcome``: how late each one started past
        its due time (``ended``: how late it ended, the store's answer included), and its
        lease."""
        found = []
        for path in self.renewals.parent.glob(f"{self.renewals.name}.*"):
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 4 and parts[3] == outcome:
                    found.append((float(parts[1 if ended else 0]), float(parts[2])))
        return found

    # -- load ------------------------------------------------------------------------

    def call(self, client: IdempotentClient, outcome: Outcome, path: str, body: Any) -> None:
        outcome.method, outcome.path, outcome.payload = "POST", path, body
        started = time.monotonic()

        def seen(event: RetryEvent) -> None:
            outcome.statuses.append(event.status or 0)

        client.on_retry = seen
        try:
            answer = client.post(path, json=body, key=outcome.key)
            outcome.statuses.append(answer.status_code)
            outcome.final = answer.status_code
            if answer.status_code < 300:
                outcome.bodies.add(answer.response.content)
        except DeadlineExceeded:
            outcome.final = outcome.statuses[-1] if outcome.statuses else 0
        outcome.finished = time.monotonic()
        with self.run.lock:
            self.run.outcomes.append(outcome)
            self.run.timings.append((outcome.finished, outcome.finished - started))
            at = outcome.finished - self.began
            self.run.statuses.extend((at, status) for status in outcome.statuses)

    def client_loop(self, index: int) -> None:
        rng = random.Random(index)
        policy = RetryPolicy(deadline=45.0)
        clients: dict[int, IdempotentClient] = {}
        while not self.stop.is_set():
            user = rng.choice(self.server.users)
            client = clients.get(user.id)
            if client is None:
                client = IdempotentClient(
                    self.proxy.url, headers={"Authorization": f"Token {user.token}"}, policy=policy
                )
                clients[user.id] = client
            roll = rng.random()
            if roll < 0.25 and self.replay(client, user, rng):
                continue
            if roll < 0.5:
                self.order_and_pay(client, user, rng)
            else:
                amount = f"{rng.randint(1, 999)}.{rng.randint(0, 99):02d}"
                outcome = Outcome("deposit", user, f"dep-{uuid.uuid4().hex}", amount=amount)
                self.call(client, outcome, "/api/accounts/me/deposit/", {"amount": amount})
        for client in clients.values():
            client.close()

    def order_and_pay(self, client: IdempotentClient, user: ChaosUser, rng: random.Random) -> None:
        amount = f"{rng.randint(1, 99)}.{rng.randint(0, 99):02d}"
        request_id = f"r-{uuid.uuid4().hex[:20]}"
        order = Outcome("order", user, f"ord-{request_id}", amount=amount)
        self.call(client, order, "/api/orders/", {"request_id": request_id, "amount": amount})
        if not order.ok:
            return
        order_id = int(json.loads(next(iter(order.bodies)))["id"])
        pay_no = f"P-{uuid.uuid4().hex[:24]}"
        pay = Outcome("pay", user, f"pay-{pay_no}", amount=amount, pay_no=pay_no)
        self.call(client, pay, f"/api/orders/{order_id}/pay/", {"pay_no": pay_no})

    def replay(self, client: IdempotentClient, user: ChaosUser, rng: random.Random) -> bool:
        """A completed deposit or payment of ``user`` sent again, well within its TTL."""
        young = time.monotonic() - self.ttl / 3
        with self.run.lock:
            done = [
                o
                for o in self.run.outcomes[-500:]
                if o.user is user and o.ok and o.kind != "order" and o.finished > young
            ]
        if not done:
            return False
        first = rng.choice(done)
        again = Outcome(first.kind, user, first.key, first.amount, first.pay_no)
        self.call(client, again, first.path, first.payload)
        with self.run.lock:
            self.run.replays += 1
        return True

    # -- faults, purge, measurements ---------------------------------------------------

    def fault_loop(self) -> None:
        for number in range(10**6):
            if self.stop.wait(self.options.fault_every):
                return
            name = FAULTS[number % len(FAULTS)]
            if name == "worker-sigkill":
                self.server.kill_a_worker()
            elif name == "pg-terminate":
                self.pg.terminate_backends(self.database)
            elif name == "redis-restart":
                self.redis.kill()
                self.redis.start()
            else:
                self.redis.freeze()
                time.sleep(3.0)
                self.redis.thaw()
            self.faults.append((time.monotonic() - self.began, name))

    def purge_loop(self) -> None:
        while not self.stop.wait(30.0):
            subprocess.run(
                [sys.executable, "manage.py", "purge_idempotency_records"],
                cwd=ROOT,
                env=self.env(),
                capture_output=True,
                timeout=120,
                check=False,
            )

    def workers(self) -> tuple[float, float, int, int]:
        """The workers' RSS (MiB, summed and largest), threads and open sockets."""
        rss = largest = 0.0
        threads = sockets = 0
        for pid in self.server.worker_pids():
            try:
                status = Path(f"/proc/{pid}/status").read_text().splitlines()
                fds = list(Path(f"/proc/{pid}/fd").iterdir())
            except OSError:
                continue
            fields = {}
            for line in status:
                name, _, value = line.partition(":")
                fields[name] = (value.split() or ["0"])[0]
            mib = int(fields.get("VmRSS", "0")) / 1024
            rss, largest = rss + mib, max(largest, mib)
            threads += int(fields.get("Threads", "0"))
            for fd in fds:
                try:
                    sockets += fd.readlink().as_posix().startswith("socket:")
                except OSError:
                    continue
        return rss, largest, threads, sockets

    def stored(self) -> tuple[int, int, int]:
        """Records in the database (all, in progress) and keys in the server's Redis."""
        import psycopg
        import redis

        records = in_progress = keys = -1
        try:
            with psycopg.connect(self.server.database_url, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT count(*), count(*) FILTER (WHERE state = 'in_progress') "
                    "FROM idempotency_idempotencyrecord"
                ).fetchone()
                records, in_progress = (int(row[0]), int(row[1])) if row else (0, 0)
        except psycopg.Error:
            pass
        with contextlib.suppress(redis.RedisError):
            keys = int(redis.Redis.from_url(self.server.redis_url, socket_timeout=2).dbsize())
        return records, in_progress, keys

    def bucket(self, start: float, end: float) -> Bucket:
        with self.run.lock:
            times = [s for at, s in self.run.timings if start <= at - self.began < end]
            statuses = Counter(str(s) for at, s in self.run.statuses if start <= at < end)
        rss, largest, threads, sockets = self.workers()
        records, in_progress, keys = self.stored()
        late = [started for started, _lease in self.lateness()]
        cuts = statistics.quantiles(times, n=100) if len(times) >= 2 else [0.0] * 99
        return Bucket(
            start=start,
            statuses=dict(sorted(statuses.items())),
            operations=len(times),
            p50_ms=cuts[49] * 1000,
            p99_ms=cuts[98] * 1000,
            rss_mib=rss,
            worker_rss_max_mib=largest,
            threads=threads,
            sockets=sockets,
            records=records,
            in_progress=in_progress,
            redis_keys=keys,
            faults=[name for at, name in self.faults if start <= at < end],
            renewals=len(late),
            renewal_late_max_ms=max(late, default=0.0) * 1000,
        )

    # -- the run ---------------------------------------------------------------------

    def execute(self) -> tuple[list[Bucket], dict[str, Any]]:
        self.server.prepare(users=8)
        self.server.start()
        try:
            buckets = self.load()
            return buckets, self.verdict()
        finally:
            self.stop.set()
            self.server.stop()
            self.proxy.close()

    def load(self) -> list[Bucket]:
        """The load, the faults and the purge for the run's minutes, measured by bucket."""
        self.began = time.monotonic()
        threads = [
            threading.Thread(target=self.client_loop, args=(i,), daemon=True)
            for i in range(self.options.threads)
        ]
        threads += [
            threading.Thread(target=self.fault_loop, daemon=True),
            threading.Thread(target=self.purge_loop, daemon=True),
        ]
        for thread in threads:
            thread.start()
        buckets: list[Bucket] = []
        length = self.options.minutes * 60
        try:
            while (start := len(buckets) * self.options.bucket) < length:
                time.sleep(max(0.0, self.began + start + self.options.bucket - time.monotonic()))
                buckets.append(self.bucket(start, start + self.options.bucket))
                print(f"soak: {_row(buckets[-1])}", flush=True)
        finally:
            self.stop.set()
            for thread in threads:
                thread.join(timeout=60)
        return buckets

    def verdict(self) -> dict[str, Any]:
        checker = Checker(self.server.database_url, self.server.redis_url, self.options.variant)
        outcomes = self.run.outcomes
        if checker.abandoned(any_lease=True):
            time.sleep(self.server.lease + 0.5)
        abandoned = checker.abandoned_calls(outcomes)
        for call in abandoned:  # retried once more after its lease, as its client would
            client = IdempotentClient(
                self.proxy.url, headers={"Authorization": f"Token {call.user.token}"}
            )
            with client:
                self.call(client, Outcome(call.kind, call.user, call.key, call.amount,
                                          call.pay_no), call.path, call.payload)  # fmt: skip
        accounts = [user.account for user in self.server.users]
        verdict = checker.verify(self.run.outcomes, accounts)
        paid = {o.pay_no for o in self.run.outcomes if o.kind == "pay" and o.ok}
        charges = checker._rows(
            "SELECT count(*) FROM payments_paymentrecord WHERE pay_no = ANY(%s)", [list(paid)]
        )[0][0]
        return {
            "operations": len(self.run.outcomes),
            "replays sent": self.run.replays,
            "payments answered 2xx": len(paid),
            "charges for them": int(charges),
            "keys applied twice": verdict.dupes,
            "2xx not applied": verdict.not_applied,
            "answers that differ from the first": verdict.diverging,
            "balances not equal to their ledger": verdict.unbalanced,
            "stuck in progress": verdict.stuck,
            "gave up": verdict.failed,
            "abandoned, retried": len(abandoned),
            "renewals": renewal_histogram(self.lateness()),
            "renewals, by how late they ended": renewal_histogram(self.lateness(ended=True)),
            "renewals that failed (store unreachable; retried)": len(self.lateness("failed")),
            "renewals refused (the key was taken over)": len(self.lateness("lost")),
            "proxy fates": {
                f"{fate} {status}": n
                for (fate, status), n in sorted(self.proxy.fates().items(), key=str)
            },  # fmt: skip
        }


def _row(b: Bucket) -> str:
    return (
        f"{b.start / 60:5.1f} min | {b.operations} ops | p50 {b.p50_ms:.0f} ms | "
        f"p99 {b.p99_ms:.0f} ms | RSS {b.rss_mib:.0f} MiB (max {b.worker_rss_max_mib:.0f}) "
        f"| threads {b.threads} | sockets {b.sockets} | records {b.records} "
        f"({b.in_progress} in progress) | redis keys {b.redis_keys} | statuses {b.statuses} "
        f"| renewals {b.renewals} (latest started {b.renewal_late_max_ms:.0f} ms late) "
        f"| faults {', '.join(b.faults) or '-'}"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=2.0, help="length of the load")
    # redis: lease mode, where the keep-alive renews (atomic mode's claim needs none)
    parser.add_argument("--variant", default="redis", choices=sorted(VARIANTS))
    parser.add_argument("--bucket", type=float, default=60.0, help="seconds per report row")
    parser.add_argument("--threads", type=int, default=6, help="client threads")
    parser.add_argument("--fault-every", type=float, default=10.0, help="seconds between faults")
    parser.add_argument("--ttl", type=float, default=60.0, help="the records' TTL, seconds")
    parser.add_argument("--lease", type=float, default=4.0, help="the lease, seconds")
    parser.add_argument("--output", default="soak-report", help="directory of the report")
    options = parser.parse_args(argv)
    started = time.monotonic()
    with PrivatePostgres() as pg, PrivateRedis(aof=True) as redis:
        buckets, end = Soak(options, pg, redis).execute()
    judged = criteria(buckets, end, options.ttl, options.bucket)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    head = (
        f"Soak of {stamp}: store variant {options.variant}, {options.minutes:g} min of load "
        f"({time.monotonic() - started:.0f} s in all), {options.threads} client threads, "
        f"gunicorn with 4 sync workers, lease {options.lease:g} s, TTL {options.ttl:g} s, "
        f"a fault every {options.fault_every:g} s ({', '.join(FAULTS)}), the purge every 30 s."
    )
    write(Path(options.output), buckets, end, judged, head)
    print((Path(options.output) / "soak.md").read_text())
    failed = [name for name, held, _ in judged if held is False]
    if failed:
        print(f"soak: FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"soak: passed; report in {options.output}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
