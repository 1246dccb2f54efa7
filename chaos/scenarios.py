"""The faults, one function each: load from retrying clients while something breaks.

Every scenario is bounded: its load runs for ``seconds`` and at most ``max_calls`` flows,
each key's retries stop after the client's deadline, and every fault loop ends with
the load. It returns the outcomes to check and a note for the table.
"""

from __future__ import annotations

import functools
import json
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from chaos.app import ChaosUser, SampleServer
from chaos.client import Api, Outcome, raw_request, run_load, storm
from chaos.services import PrivatePostgres, PrivateRedis


@dataclass
class Scale:
    seconds: float  # load per fault scenario
    soak_seconds: float
    storm_rounds: int
    threads: int = 6
    malformed: int = 200
    storm_width: int = 50


FULL = Scale(seconds=20, soak_seconds=90, storm_rounds=3)
SMOKE = Scale(seconds=6, soak_seconds=10, storm_rounds=1)


@dataclass
class Context:
    server: SampleServer
    api: Api
    pg: PrivatePostgres
    redis: PrivateRedis
    database: str
    scale: Scale

    @property
    def users(self) -> list[ChaosUser]:
        return self.server.users


@dataclass
class Result:
    outcomes: list[Outcome]
    note: str = ""
    failures_allowed: bool = False  # malformed requests are meant to fail
    no_5xx: bool = False  # every request must be answered without a 5xx
    extra_failures: list[str] = field(default_factory=list)


def _every(interval: float, seconds: float, action: Callable[[], object]) -> int:
    """Run ``action`` every ``interval`` seconds for ``seconds``; how many times it ran."""
    count = 0
    stop = time.monotonic() + seconds
    while time.monotonic() + interval < stop:
        time.sleep(interval)
        action()
        count += 1
    return count


def _load(
    ctx: Context, during: Callable[[], None] | None, seconds: float | None = None
) -> list[Outcome]:
    seconds = ctx.scale.seconds if seconds is None else seconds
    return run_load(
        ctx.api,
        ctx.users,
        seconds=seconds,
        threads=ctx.scale.threads,
        max_calls=int(seconds * 200),  # a bound only: the load lasts the whole time
        during=during,
    )


def worker_sigkill(ctx: Context) -> Result:
    kills = [0]

    def fault() -> None:
        kills[0] = _every(0.5, ctx.scale.seconds, ctx.server.kill_a_worker)

    outcomes = _load(ctx, fault)
    return Result(outcomes, f"{kills[0]} worker SIGKILLs")


def _redis_restarts(ctx: Context, *, aof: bool) -> Result:
    restarts = [0]

    def restart() -> None:
        ctx.redis.kill()
        ctx.redis.start()
        restarts[0] += 1

    def fault() -> None:
        if ctx.redis.aof != aof:
            ctx.redis.reset(aof=aof)
            restarts[0] += 1
        _every(ctx.scale.seconds / 3, ctx.scale.seconds, restart)

    try:
        outcomes = _load(ctx, fault)
    finally:
        if not aof:
            ctx.redis.reset(aof=True)  # back to durable for the next scenarios
    mode = "AOF" if aof else "no persistence"
    return Result(outcomes, f"{restarts[0]} Redis SIGKILL+restarts ({mode})")


def redis_restart_aof(ctx: Context) -> Result:
    return _redis_restarts(ctx, aof=True)


def redis_restart_forgetful(ctx: Context) -> Result:
    return _redis_restarts(ctx, aof=False)


def redis_outage(ctx: Context) -> Result:
    """Redis down for a third of the load: the response cache (db-cache) must not matter."""
    window: list[float] = []

    def fault() -> None:
        time.sleep(ctx.scale.seconds / 3)
        ctx.redis.kill()
        window.append(time.monotonic())
        time.sleep(ctx.scale.seconds / 3)
        window.append(time.monotonic())
        ctx.redis.start()

    outcomes = _load(ctx, fault)
    # calls answered while Redis was down: proof that the outage met the load
    during = sum(1 for o in outcomes if window[0] < o.finished < window[1])
    note = f"Redis down {ctx.scale.seconds / 3:.0f} s; {during} calls answered meanwhile"
    # with the database store, Redis is only a cache: not one request may fail over it
    return Result(
        outcomes,
        note,
        no_5xx=ctx.server.variant != "redis",
        extra_failures=[] if during or ctx.server.variant == "redis" else ["no call met it"],
    )


def pg_terminate(ctx: Context) -> Result:
    ended = [0]

    def terminate() -> None:
        ended[0] += ctx.pg.terminate_backends(ctx.database)

    def fault() -> None:
        _every(1.0, ctx.scale.seconds, terminate)

    outcomes = _load(ctx, fault)
    return Result(outcomes, f"{ended[0]} sessions ended by pg_terminate_backend")


def pg_restart(ctx: Context) -> Result:
    def fault() -> None:
        time.sleep(ctx.scale.seconds / 3)
        ctx.pg.restart()

    outcomes = _load(ctx, fault)
    return Result(outcomes, "PostgreSQL crash-restart (immediate stop, start)")


def storms(ctx: Context) -> Result:
    width = ctx.scale.storm_width
    outcomes: list[Outcome] = []
    for _round in range(ctx.scale.storm_rounds):
        user = random.choice(ctx.users)
        key = f"storm-dep-{uuid.uuid4().hex}"
        amount = f"{random.randint(1, 99)}.00"
        made = storm(ctx.api, functools.partial(ctx.api.deposit, user, key, amount), width)
        outcomes.extend(made)
        order = ctx.api.order(user, "5.00")
        if not order.ok:
            outcomes.append(order)
            continue
        order_id = int(json.loads(next(iter(order.bodies)))["id"])
        pay_key, pay_no = f"storm-pay-{uuid.uuid4().hex}", f"P-{uuid.uuid4().hex[:24]}"
        paid = storm(
            ctx.api, functools.partial(ctx.api.pay, user, order_id, pay_key, pay_no), width
        )
        outcomes.extend(paid)
    return Result(outcomes, f"{ctx.scale.storm_rounds}x2 storms of {width} identical requests")


def _two_keys(port: int, token: str) -> tuple[int, bytes]:
    """A request with the Idempotency-Key header twice (http.client cannot send it)."""
    body = b'{"amount": "1.00"}'
    request = (
        "POST /api/accounts/me/deposit/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Token {token}\r\nContent-Type: application/json\r\n"
        "Idempotency-Key: a\r\nIdempotency-Key: b\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), head + b"\n" + rest


def malformed(ctx: Context) -> Result:
    """Requests a fuzzer would send: each must be a 4xx problem, never a 5xx or an effect."""
    user = ctx.users[0]
    auth = {"Authorization": f"Token {user.token}"}
    json_type = {**auth, "Content-Type": "application/json"}
    deposit = "/api/accounts/me/deposit/"
    cases: list[tuple[str, str, bytes, dict[str, str]]] = [
        ("POST", deposit, b'{"amount": "1.00"}', {**json_type, "Idempotency-Key": ""}),
        ("POST", deposit, b'{"amount": "1.00"}', {**json_type, "Idempotency-Key": "x" * 300}),
        ("POST", deposit, b'{"amount": "1.00"}', {**json_type, "Idempotency-Key": '"a";p=1'}),
        ("POST", deposit, b"{not json", {**json_type, "Idempotency-Key": "m-1"}),
        ("POST", deposit, b'{"amount": 1e400}', {**json_type, "Idempotency-Key": "m-2"}),
        ("POST", deposit, b'{"amount": "-5.00"}', {**json_type, "Idempotency-Key": "m-3"}),
        ("POST", deposit, b'{"amount": "1.001"}', {**json_type, "Idempotency-Key": "m-4"}),
        ("POST", deposit, b'{"amount": "99999999999999"}', {**json_type, "Idempotency-Key": "m5"}),
        ("POST", deposit, b'{"amount": ["1"]}', {**json_type, "Idempotency-Key": "m-6"}),
        ("POST", deposit, b"\xff\xfe\x00", {**json_type, "Idempotency-Key": "m-7"}),
        ("POST", deposit, b"[]", {**json_type, "Idempotency-Key": "m-8"}),
        ("POST", deposit, b'{"amount": "1.00"}', {**json_type}),  # a key is required
        ("POST", deposit, b'{"amount": "1.00", "reference": "pay_x"}', {**json_type,
         "Idempotency-Key": "m-9"}),
        ("POST", deposit, b'{"amount": "1.00"}', {**auth, "Content-Type": "text/xml",
         "Idempotency-Key": "m-10"}),
        ("POST", deposit, b'{"amount": "1.00"}', {"Content-Type": "application/json",
         "Idempotency-Key": "m-11"}),  # anonymous
        ("POST", "/api/orders/999999999/pay/", b'{"pay_no": "x"}', {**json_type,
         "Idempotency-Key": "m-12"}),
        ("POST", "/api/orders/", b'{"request_id": "", "amount": "1.00"}', {**json_type}),
        ("POST", "/api/orders/", b'{"request_id": "r", "amount": "0"}', {**json_type}),
        ("POST", "/api/payments/callback/", b'{"trade_no": "t"}', {"Content-Type":
         "application/json", "X-Gateway-Signature": "00"}),
        ("POST", deposit, b'{"amount": "' + b"9" * 5000 + b'"}', {**json_type,
         "Idempotency-Key": "m-13"}),
    ]  # fmt: skip
    statuses: list[int] = []
    bad: list[str] = []
    for i in range(ctx.scale.malformed):
        if i % len(cases) == len(cases) - 1:
            status, raw = _two_keys(ctx.server.port, user.token)
            if status >= 500 or status < 400:
                bad.append(f"two keys -> {status}")
            statuses.append(status)
            continue
        method, path, body, headers = cases[i % len(cases)]
        answer = raw_request(ctx.server.port, method, path, body, headers)
        status = 0 if answer is None else answer[0]
        statuses.append(status)
        if answer is None or status >= 500 or status < 400:
            bad.append(f"case {i % len(cases)} -> {status}")
        elif not answer[1].get("Content-Type", "").startswith("application/problem+json"):
            bad.append(f"case {i % len(cases)} -> {status} not problem+json")
    outcome = Outcome("malformed", user, "malformed", statuses=statuses, final=400)
    return Result(
        [outcome],
        f"{len(statuses)} malformed requests, {len(bad)} not a 4xx problem",
        failures_allowed=True,
        extra_failures=sorted(set(bad)),
    )


def soak(ctx: Context) -> Result:
    warm = _load(ctx, None, seconds=min(10.0, ctx.scale.soak_seconds / 4))
    before = ctx.server.workers_rss_mib()
    outcomes = _load(ctx, None, seconds=ctx.scale.soak_seconds)
    after = ctx.server.workers_rss_mib()
    growth = (after - before) / before * 100 if before else 0.0
    return Result(
        warm + outcomes,
        f"{ctx.scale.soak_seconds:.0f} s; workers' RSS {before:.0f} -> {after:.0f} MiB "
        f"({growth:+.0f}%)",
    )


SCENARIOS: dict[str, Callable[[Context], Result]] = {
    "worker-sigkill": worker_sigkill,
    "redis-restart-aof": redis_restart_aof,
    "redis-restart-no-persistence": redis_restart_forgetful,
    "redis-outage": redis_outage,
    "pg-terminate": pg_terminate,
    "pg-restart": pg_restart,
    "storms": storms,
    "malformed": malformed,
    "soak": soak,
}
SMOKE_SCENARIOS = ("worker-sigkill", "redis-restart-no-persistence", "redis-outage", "storms")
