"""The double-charge story, live: a retrying client against two pay endpoints.

:func:`run_storm` starts the sample server (``manage.py runserver`` with
``config.settings_demo``, on the database this process uses: PostgreSQL when
``DATABASE_URL`` says so, else the SQLite file), funds two customers alike and
pays each one's orders through a client that retries like real ones do: on a
timeout, a 5xx or a 409 "still in progress", with the same request, while a few
duplicates of each payment run at the same moment (a double click, a proxy's
retry). One customer pays through the naive endpoint, the other through the
protected ``POST /api/orders/{id}/pay/``. Then the database is asked what it did.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, fields
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections
from rest_framework.authtoken.models import Token

from accounts.models import Account, LedgerEntry, LedgerEntryKind
from accounts.services import account_deposit, account_get_or_create_for_user
from orders.services import order_create

NAIVE = "naive"
PROTECTED = "protected"
Progress = Callable[[int, int, int], None]


@dataclass(frozen=True)
class StormConfig:
    payments: int = 20
    duplicates: int = 3
    amount: Decimal = Decimal("25.00")
    #: The client's timeout (raised to fit the machine: see :func:`calibrated`).
    timeout: float = 0.25
    attempts: int = 8
    delay: float = 0.4
    #: How long the last attempt of a payment waits for its answer, so that every
    #: payment is answered unless the server really is stuck.
    settle_timeout: float = 30.0


@dataclass
class Side:
    """One endpoint's storm: what the client saw, then what the database holds."""

    name: str
    payments: int
    requests: int = 0
    timeouts: int = 0
    retries: int = 0
    replays: int = 0
    in_progress: int = 0
    server_errors: int = 0
    paid: int = 0
    gave_up: int = 0
    charges: int = 0
    #: From the database: orders charged at least once, and charges beyond one per order.
    charged_orders: int = 0
    double_charges: int = 0
    timeout: float = 0.0
    charged: Decimal = Decimal("0")
    balance_start: Decimal = Decimal("0")
    balance_expected: Decimal = Decimal("0")
    balance: Decimal = Decimal("0")
    account_id: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, **increments: int) -> None:
        with self._lock:
            for name, value in increments.items():
                setattr(self, name, getattr(self, name) + value)

    @property
    def conclusive(self) -> bool:
        """Whether every payment got its answer and the database charged every order:
        only then can "exactly once" be told from "never tried"."""
        return self.gave_up == 0 and self.charged_orders == self.payments

    def as_dict(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_lock"}
        return {k: str(v) if isinstance(v, Decimal) else v for k, v in values.items()}


# -- the server ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def database_url(alias: str = "default") -> str:
    """A ``DATABASE_URL`` naming the database this process uses, for the server."""
    db = connections[alias].settings_dict
    schemes = {"django.db.backends.postgresql": "postgres", "django.db.backends.mysql": "mysql"}
    if db["ENGINE"] in schemes:
        auth = quote(db.get("USER") or "")
        if db.get("PASSWORD"):
            auth += ":" + quote(db["PASSWORD"])
        host = db.get("HOST") or "127.0.0.1"
        port = f":{db['PORT']}" if db.get("PORT") else ""
        return f"{schemes[db['ENGINE']]}://{auth}@{host}{port}/{quote(db['NAME'])}"
    name = str(db["NAME"])
    in_memory = name == ":memory:" or "mode=memory" in name
    if db["ENGINE"] != "django.db.backends.sqlite3" or in_memory:
        raise RuntimeError("The demo needs PostgreSQL, MySQL/MariaDB or a SQLite database file.")
    return f"sqlite:///{Path(name).resolve()}"


@contextmanager
def demo_server(delay: float) -> Iterator[str]:
    """``runserver`` with the demo settings on a free loopback port; its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_demo",
        "DATABASE_URL": database_url(),
        "DEMO_RESPONSE_DELAY": str(delay),
        "PYTHONUNBUFFERED": "1",
    }
    manage = Path(settings.BASE_DIR) / "manage.py"
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [
                sys.executable,
                str(manage),
                "runserver",
                "--noreload",
                "--skip-checks",
                f"127.0.0.1:{port}",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        try:
            _wait_for(port, process, log)
            yield f"127.0.0.1:{port}"
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def _wait_for(port: int, process: subprocess.Popen[bytes], log: Any) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"the demo server exited: {log.read()[-2000:].decode()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the demo server did not start within 60 s")


# -- the client ---------------------------------------------------------------------------


def post(
    server: str, path: str, body: dict[str, Any], headers: dict[str, str], timeout: float
) -> tuple[int, dict[str, str], bytes]:
    """One POST with a JSON body; raises ``TimeoutError`` when the answer is late."""
    connection = http.client.HTTPConnection(server, timeout=timeout)
    try:
        connection.request(
            "POST",
            path,
            body=json.dumps(body),
            headers={"Content-Type": "application/json", **headers},
        )
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def pay_until_answered(
    side: Side,
    server: str,
    path: str,
    headers: dict[str, str],
    body: dict[str, Any],
    config: StormConfig,
) -> bool:
    """Retry one payment like a real client: same request, growing pauses, and a last
    attempt that waits up to ``settle_timeout`` for its answer. Paid?"""
    for attempt in range(config.attempts):
        if attempt:
            side.count(retries=1)
            time.sleep(min(0.02 * 2**attempt, 0.3))
        side.count(requests=1)
        last = attempt == config.attempts - 1
        timeout = max(side.timeout, config.settle_timeout) if last else side.timeout
        try:
            status, response_headers, _ = post(server, path, body, headers, timeout)
        except TimeoutError:
            side.count(timeouts=1)
            continue
        except OSError:
            side.count(server_errors=1)
            continue
        if 200 <= status < 300:
            if response_headers.get("Idempotent-Replayed") == "true":
                side.count(replays=1)
            return True
        if status >= 500:
            side.count(server_errors=1)
            continue
        if status == 409 and "Retry-After" in response_headers:
            side.count(in_progress=1)
            time.sleep(min(float(response_headers["Retry-After"]), 2.0))
            continue
        return False  # a definitive answer: retrying would not change it
    return False


# -- the storm ----------------------------------------------------------------------------


def _customer(name: str, config: StormConfig) -> tuple[str, int, list[int], Decimal]:
    """A funded customer with ``payments`` orders: token, account id, order ids, balance."""
    user = get_user_model().objects.create(username=name)
    token = Token.objects.create(user=user)
    account = account_get_or_create_for_user(user=user)
    # enough for every request to charge, so a double charge is never refused
    funds = config.amount * config.payments * (config.duplicates * config.attempts)
    account_deposit(account_id=account.pk, amount=funds, reference=f"{name}-funds")
    orders = [
        order_create(user=user, request_id=f"{name}-{i}", amount=config.amount)[0].pk
        for i in range(config.payments)
    ]
    return token.key, account.pk, orders, funds


def _storm_side(
    side: Side,
    server: str,
    token: str,
    orders: list[int],
    config: StormConfig,
    progress: Progress,
    done: list[int],
    total: int,
) -> None:
    def one(order_id: int, barrier: threading.Barrier, key: str) -> bool:
        headers = {"Authorization": f"Token {token}"}
        if side.name == NAIVE:
            path = f"/demo/naive/orders/{order_id}/pay/"
        else:
            path = f"/api/orders/{order_id}/pay/"
            headers["Idempotency-Key"] = key
        body = {"pay_no": f"PAY-{order_id}-{key[:16]}"}  # the ledger names the order
        with suppress(threading.BrokenBarrierError):
            barrier.wait()  # the duplicates of one payment leave together
        try:
            return pay_until_answered(side, server, path, headers, body, config)
        finally:
            with side._lock:
                done[0] += 1
            progress(done[0], total, side.requests)

    workers = max(config.duplicates, min(4 * config.duplicates, 24))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = []
        for order_id in orders:
            barrier = threading.Barrier(config.duplicates, timeout=30)
            key = uuid.uuid4().hex
            futures.append(
                [pool.submit(one, order_id, barrier, key) for _ in range(config.duplicates)]
            )
        for group in futures:
            if any(f.result() for f in group):
                side.count(paid=1)
            else:
                side.count(gave_up=1)
    for alias in connections:
        connections[alias].close()


#: The order a deduction charged, from its reference: ``naive_<order>_...`` (the naive
#: endpoint) or ``pay_PAY-<order>-...`` (the protected one, via the storm's pay_no).
ORDER_OF_REFERENCE = re.compile(r"^(?:naive_|pay_PAY-)(\d+)[-_]")


def _audit(side: Side, start: Decimal, orders: list[int]) -> None:
    """What the database holds: charges per order, never what the client believed."""
    deductions = list(
        LedgerEntry.objects.filter(account_id=side.account_id, kind=LedgerEntryKind.DEDUCTION)
    )
    per_order = Counter(
        int(match.group(1))
        for entry in deductions
        if (match := ORDER_OF_REFERENCE.match(entry.reference))
    )
    side.charges = len(deductions)
    side.charged_orders = sum(1 for order in orders if per_order[order] > 0)
    side.double_charges = sum(max(0, per_order[order] - 1) for order in orders)
    side.double_charges += len(deductions) - sum(per_order.values())  # unattributable: extra
    side.charged = -sum((e.amount for e in deductions), Decimal("0"))
    side.balance_start = start
    side.balance = Account.objects.get(pk=side.account_id).balance
    side.balance_expected = start - side.charged


def calibrated(server: str, token: str, config: StormConfig) -> float:
    """The client's timeout, raised to fit this machine: at least four times the slowest
    of a few requests the network delay does not touch (GETs), so that on a busy
    machine answers still come in time and only the simulated network makes them late."""
    slowest = 0.0
    for attempt in range(4):  # the first one warms the server up and is not counted
        started = time.monotonic()
        connection = http.client.HTTPConnection(server, timeout=config.settle_timeout)
        try:
            connection.request("GET", "/api/orders/", headers={"Authorization": f"Token {token}"})
            connection.getresponse().read()
        except OSError:
            return max(config.timeout, 5.0)
        finally:
            connection.close()
        if attempt:
            slowest = max(slowest, time.monotonic() - started)
    return max(config.timeout, round(4 * slowest, 2))


def run_storm(config: StormConfig, progress: Progress | None = None) -> dict[str, Side]:
    """Run the storm against both endpoints, one after the other; what each did."""
    run = uuid.uuid4().hex[:8]
    report = progress or (lambda done, total, requests: None)
    sides: dict[str, Side] = {}
    customers = {name: _customer(f"storm-{run}-{name}", config) for name in (NAIVE, PROTECTED)}
    total = 2 * config.payments * config.duplicates
    done = [0]
    with demo_server(config.delay) as server:
        timeout = calibrated(server, customers[NAIVE][0], config)  # the same for both
        for name, (token, account_id, orders, _) in customers.items():
            side = Side(name=name, payments=config.payments, account_id=account_id)
            side.timeout = timeout
            _storm_side(side, server, token, orders, config, report, done, total)
            sides[name] = side
    for name, side in sides.items():
        _audit(side, customers[name][3], customers[name][2])
    return sides
