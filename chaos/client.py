"""Clients that retry as real ones do: on connection errors, 5xx and 409, within bounds.

Every keyed call keeps what it saw (each status, every 2xx body) in an
:class:`Outcome`, so the invariants can compare the answers with the database.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.app import ChaosUser

RETRYABLE = frozenset({409, 500, 502, 503, 504})


@dataclass
class Outcome:
    kind: str  # "deposit", "pay", "order"
    user: ChaosUser
    key: str
    amount: str = ""
    pay_no: str = ""
    method: str = "POST"
    path: str = ""
    payload: dict[str, Any] = field(default_factory=dict)
    statuses: list[int] = field(default_factory=list)  # 0: a connection error
    bodies: set[bytes] = field(default_factory=set)
    final: int = 0
    finished: float = 0.0  # time.monotonic() of the last answer

    @property
    def ok(self) -> bool:
        return 200 <= self.final < 300


def raw_request(
    port: int, method: str, path: str, body: bytes, headers: dict[str, str], timeout: float = 15
) -> tuple[int, dict[str, str], bytes] | None:
    """One request on a fresh connection; None on a connection error or timeout."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


class Api:
    """The sample's API on ``port``, called as a retrying client."""

    def __init__(self, port: int, *, deadline: float = 60.0) -> None:
        self.port = port
        self.deadline = deadline  # a key's retries stop after this many seconds
        self.lock = threading.Lock()
        self.requests = 0

    def call(self, outcome: Outcome, method: str, path: str, payload: dict[str, Any]) -> Outcome:
        outcome.method, outcome.path, outcome.payload = method, path, payload
        body = json.dumps(payload).encode()
        headers = {
            "Authorization": f"Token {outcome.user.token}",
            "Content-Type": "application/json",
            "Idempotency-Key": outcome.key,
        }
        stop = time.monotonic() + self.deadline
        while True:
            answer = raw_request(self.port, method, path, body, headers)
            with self.lock:
                self.requests += 1
            status = 0 if answer is None else answer[0]
            outcome.statuses.append(status)
            outcome.final = status
            outcome.finished = time.monotonic()
            if answer is not None and 200 <= status < 300:
                outcome.bodies.add(answer[2])
            if status and status not in RETRYABLE:
                return outcome
            if time.monotonic() > stop:
                return outcome
            wait = 0.1 if answer is None else float(answer[1].get("Retry-After", "0.2"))
            time.sleep(min(wait, 1.0) * random.uniform(0.5, 1.0))

    def again(self, first: Outcome) -> Outcome:
        """The same request (key, path, body) sent again, as a client retrying later."""
        outcome = Outcome(first.kind, first.user, first.key, first.amount, first.pay_no)
        return self.call(outcome, first.method, first.path, first.payload)

    def deposit(self, user: ChaosUser, key: str | None = None, amount: str = "") -> Outcome:
        amount = amount or f"{random.randint(1, 999)}.{random.randint(0, 99):02d}"
        outcome = Outcome("deposit", user, key or f"dep-{uuid.uuid4().hex}", amount=amount)
        return self.call(outcome, "POST", "/api/accounts/me/deposit/", {"amount": amount})

    def order(self, user: ChaosUser, amount: str) -> Outcome:
        request_id = f"r-{uuid.uuid4().hex[:20]}"
        outcome = Outcome("order", user, f"ord-{request_id}", amount=amount)
        return self.call(
            outcome, "POST", "/api/orders/", {"request_id": request_id, "amount": amount}
        )

    def pay(
        self, user: ChaosUser, order_id: int, key: str | None = None, pay_no: str = ""
    ) -> Outcome:
        pay_no = pay_no or f"P-{uuid.uuid4().hex[:24]}"
        outcome = Outcome("pay", user, key or f"pay-{pay_no}", pay_no=pay_no)
        return self.call(outcome, "POST", f"/api/orders/{order_id}/pay/", {"pay_no": pay_no})

    def order_and_pay(self, user: ChaosUser) -> list[Outcome]:
        amount = f"{random.randint(1, 99)}.{random.randint(0, 99):02d}"
        order = self.order(user, amount)
        if not order.ok:
            return [order]
        order_id = int(json.loads(next(iter(order.bodies)))["id"])
        pay = self.pay(user, order_id)
        pay.amount = amount
        return [order, pay]


def run_load(
    api: Api,
    users: list[ChaosUser],
    *,
    seconds: float,
    threads: int,
    max_calls: int,
    pay_share: float = 0.25,
    during: Callable[[], None] | None = None,
) -> list[Outcome]:
    """``threads`` clients sending deposits and order+pay flows for ``seconds`` (and at most
    ``max_calls`` flows), while ``during`` (the fault) runs in the calling thread."""
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    started = [0]

    def client(index: int) -> None:
        rng = random.Random(index)
        while time.monotonic() < stop_at:
            with lock:
                if started[0] >= max_calls:
                    return
                started[0] += 1
            user = users[rng.randrange(len(users))]
            made = api.order_and_pay(user) if rng.random() < pay_share else [api.deposit(user)]
            with lock:
                outcomes.extend(made)

    workers = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    if during is not None:
        during()
    for worker in workers:
        worker.join(timeout=seconds + api.deadline + 30)
    return outcomes


def storm(api: Api, make: Callable[[], Outcome], width: int) -> list[Outcome]:
    """``width`` identical requests (same key, same body) released at once."""
    barrier = threading.Barrier(width)
    results: list[Outcome] = []
    lock = threading.Lock()

    def one() -> None:
        barrier.wait(timeout=30)
        outcome = make()
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=one, daemon=True) for _ in range(width)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=api.deadline + 60)
    return results
