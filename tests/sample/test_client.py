"""``idempotency.client`` against the sample under gunicorn, through a lossy network.

A fault-injecting proxy (``tests/proxy.py``) sits between the client and the server and
drops answers after the server gave them, holds them past the client's read timeout and
resets connections. Charges are counted from the database (ledger deductions), and each
answer the client returns is compared with the answer the server stored first.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.db import connections
from rest_framework.authtoken.models import Token

from accounts.models import Account
from accounts.services import account_deposit, account_get_or_create_for_user
from idempotency.client import (
    AsyncIdempotentClient,
    DeadlineExceeded,
    IdempotentClient,
    KeyMismatch,
    RetryEvent,
    RetryPolicy,
)
from idempotency.models import IdempotencyRecord
from orders.models import Order
from orders.services import order_create
from payments.models import PaymentRecord
from tests.support import services
from tests.support.ledger import charges
from tests.support.proxy import FaultProxy, Plan, SampleServer

pytestmark = [pytest.mark.server_db, pytest.mark.django_db(transaction=True)]

PAYMENTS = 12
AMOUNT = Decimal("10.00")
START = Decimal("1000.00")
#: The first attempts' fates, by payment: every payment meets at least one fault.
FIRST_FATES = ("drop", "delay", "reset", "drop")
READ_TIMEOUT = 1.5
POLICY = RetryPolicy(deadline=30, timeout=httpx.Timeout(READ_TIMEOUT, connect=2.0), backoff=0.05)


def lossy(identity: str, attempt: int, *, order_of: dict[str, int]) -> str:
    """The network: payment i's first attempt meets FIRST_FATES[i % 4], every third
    payment's second attempt is dropped too, later attempts pass."""
    index = order_of.get(identity, 0)
    if attempt == 1:
        return FIRST_FATES[index % len(FIRST_FATES)]
    if attempt == 2 and index % 3 == 0:
        return "drop"
    return "pass"


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[SampleServer] = []

    def start(**env: str) -> SampleServer:
        log = tmp_path / f"gunicorn-{len(started)}.log"
        server = SampleServer(log, services.tests_database_url(), env=env)
        started.append(server)
        return server.wait_ready()

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def proxies() -> Iterator[Any]:
    opened: list[FaultProxy] = []

    def open_proxy(port: int, plan: Plan) -> FaultProxy:
        proxy = FaultProxy(port, plan)
        opened.append(proxy)
        return proxy

    yield open_proxy
    for proxy in opened:
        proxy.close()


def customer(name: str) -> tuple[User, str]:
    user = User.objects.create_user(name)
    account = account_get_or_create_for_user(user=user)
    account_deposit(account_id=account.pk, amount=START, reference=f"seed_{name}")
    return user, Token.objects.create(user=user).key


def orders_of(user: User, count: int) -> list[Order]:
    return [
        order_create(user=user, request_id=f"o-{index}", amount=AMOUNT)[0] for index in range(count)
    ]


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_n_payments_through_a_lossy_network_charge_n_times(
    serve: Any, proxies: Any, flavour: str
) -> None:
    server = serve()
    user, token = customer("alice")
    orders = orders_of(user, PAYMENTS)
    keys = {order.pk: str(uuid.uuid4()) for order in orders}
    order_of = {key: index for index, key in enumerate(keys.values())}
    proxy = proxies(server.port, lambda i, a: lossy(i, a, order_of=order_of))
    auth = {"Authorization": f"Token {token}"}

    def pay(order: Order) -> Any:
        with IdempotentClient(proxy.url, policy=POLICY, headers=auth) as client:
            return client.post(
                f"/api/orders/{order.pk}/pay/", json={"pay_no": f"p-{order.pk}"}, key=keys[order.pk]
            )

    async def pay_all() -> list[Any]:
        async with AsyncIdempotentClient(proxy.url, policy=POLICY, headers=auth) as client:
            return list(
                await asyncio.gather(
                    *(
                        client.post(
                            f"/api/orders/{o.pk}/pay/", json={"pay_no": f"p-{o.pk}"}, key=keys[o.pk]
                        )
                        for o in orders
                    )
                )
            )

    if flavour == "sync":
        with ThreadPoolExecutor(max_workers=4) as pool:
            answers = list(pool.map(pay, orders))
    else:
        answers = asyncio.run(pay_all())  # all twelve at once, on one connection pool

    # the faults struck, and after the server had answered
    fates = proxy.fates()
    assert fates[("drop", 201)] >= PAYMENTS // 2
    assert fates[("delay", 201)] >= PAYMENTS // 4
    assert fates[("reset", None)] >= PAYMENTS // 4
    # exactly one charge per logical payment, counted in the database
    assert charges(user) == PAYMENTS
    assert PaymentRecord.objects.filter(user=user).count() == PAYMENTS
    assert Account.objects.get(user=user).balance == START - PAYMENTS * AMOUNT
    print(f"[client] {flavour}, one key each: {PAYMENTS} payments, {charges(user)} charges")
    for order, answer in zip(orders, answers, strict=True):
        assert answer.status_code == 201
        assert answer.key == keys[order.pk]
        assert answer.json()["order_id"] == order.pk
        # the first answer: the bytes the server stored when it charged
        stored = IdempotencyRecord.objects.get(key=keys[order.pk])
        assert answer.content == bytes(stored.response_body)
        # every attempt carried the one key; the answer the client saw was a replay
        # exactly when an earlier attempt had reached the server and its answer was lost
        passages = proxy.of(keys[order.pk])
        assert answer.attempts == len(passages) >= 2
        assert answer.replayed == any(p.status is not None for p in passages[:-1])


def test_a_naive_client_without_a_key_charges_twice(serve: Any, proxies: Any) -> None:
    """The control: the same network, a client that retries without a key."""
    server = serve()
    user, token = customer("bob")
    orders = orders_of(user, PAYMENTS)
    order_of = {f"POST /demo/naive/orders/{o.pk}/pay/ HTTP/1.1": i for i, o in enumerate(orders)}
    proxy = proxies(server.port, lambda i, a: lossy(i, a, order_of=order_of))

    def pay(order: Order) -> int:
        with httpx.Client(
            base_url=proxy.url, timeout=READ_TIMEOUT, headers={"Authorization": f"Token {token}"}
        ) as client:
            for _attempt in range(10):
                try:
                    return client.post(f"/demo/naive/orders/{order.pk}/pay/").status_code
                except httpx.TransportError:
                    continue
        raise AssertionError("never answered")

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert set(pool.map(pay, orders)) == {201}

    fates = proxy.fates()
    lost_after_charging = fates[("drop", 201)] + fates[("delay", 201)]
    assert lost_after_charging >= PAYMENTS // 2
    # every answer lost after the server charged became a second charge
    assert charges(user) == PAYMENTS + lost_after_charging
    print(f"[client] no key: {PAYMENTS} payments, {charges(user)} charges ({dict(fates)})")


def test_a_request_in_progress_is_waited_out(serve: Any, proxies: Any) -> None:
    """Lease mode: the first attempt is stuck in the view (its account row is locked), the
    client's timeout fires, the retry is answered 409 in progress with Retry-After, the
    client waits; once the first attempt finishes, the next retry gets its stored answer."""
    server = serve(IDEMPOTENCY_MODE="lease", IDEMPOTENCY_LEASE="5")
    user, token = customer("carol")
    (order,) = orders_of(user, 1)
    proxy = proxies(server.port, lambda _i, _a: "pass")
    events: list[RetryEvent] = []
    saw_409 = threading.Event()

    def on_retry(event: RetryEvent) -> None:
        events.append(event)
        if event.status == 409:
            saw_409.set()

    account = Account.objects.get(user=user)
    db = connections.create_connection("default")  # a session of its own
    db.set_autocommit(False)
    with db.cursor() as cursor:
        cursor.execute("SELECT 1 FROM accounts_account WHERE id = %s FOR UPDATE", [account.pk])
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            client = IdempotentClient(
                proxy.url,
                policy=RetryPolicy(deadline=40, timeout=httpx.Timeout(1.0), backoff=0.05),
                headers={"Authorization": f"Token {token}"},
                on_retry=on_retry,
            )
            future = pool.submit(
                client.post, f"/api/orders/{order.pk}/pay/", json={"pay_no": "p-1"}
            )
            assert saw_409.wait(30), events
            db.rollback()  # the first attempt goes on and charges
            answer = future.result(timeout=40)
            client.close()
    finally:
        db.close()

    assert answer.status_code == 201
    assert answer.replayed
    assert isinstance(events[0].error, httpx.ReadTimeout)
    in_progress = [e for e in events if e.status == 409]
    assert in_progress and all(e.retry_after is not None for e in in_progress)
    assert all(e.wait >= (e.retry_after or 0) for e in in_progress)  # Retry-After honoured
    assert charges(user) == 1


def test_a_mismatch_is_raised_at_once(serve: Any, proxies: Any) -> None:
    server = serve()
    user, token = customer("dave")
    first, second = orders_of(user, 2)
    proxy = proxies(server.port, lambda _i, _a: "pass")
    key = str(uuid.uuid4())
    with IdempotentClient(
        proxy.url, policy=POLICY, headers={"Authorization": f"Token {token}"}
    ) as client:
        paid = client.post(f"/api/orders/{first.pk}/pay/", json={"pay_no": "a"}, key=key)
        assert paid.status_code == 201
        with pytest.raises(KeyMismatch) as raised:
            client.post(f"/api/orders/{second.pk}/pay/", json={"pay_no": "b"}, key=key)
    assert raised.value.response.status_code == 422
    assert len(proxy.of(key)) == 2  # one request each: the 422 was not retried
    assert charges(user) == 1


def test_the_deadline_is_honoured_and_says_the_payment_may_have_happened(
    serve: Any, proxies: Any
) -> None:
    server = serve()
    user, token = customer("erin")
    (order,) = orders_of(user, 1)
    proxy = proxies(server.port, lambda _i, _a: "drop")  # every answer lost
    deadline = 3.0
    started = time.monotonic()
    with (
        IdempotentClient(
            proxy.url,
            policy=RetryPolicy(deadline=deadline, timeout=1.0, backoff=0.1, max_backoff=0.5),
            headers={"Authorization": f"Token {token}"},
        ) as client,
        pytest.raises(DeadlineExceeded) as raised,
    ):
        client.post(f"/api/orders/{order.pk}/pay/", json={"pay_no": "p-1"})
    elapsed = time.monotonic() - started
    error = raised.value
    # the deadline, and room for a stall of this loaded process (1 s was tight); that each
    # attempt's timeout is cut to what is left of the deadline: tests/test_client.py
    assert elapsed < deadline + 3.0
    assert error.may_have_happened
    assert "MAY HAVE HAPPENED" in str(error)
    assert error.attempts == len(proxy.of(error.key or "")) >= 2
    assert charges(user) == 1  # it did happen, once; a later retry with the key replays it
