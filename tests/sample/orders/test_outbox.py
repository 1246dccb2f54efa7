"""The transactional outbox of ``order.paid``: no paid order loses its receipt.

The broker-bound tests use a real Redis broker (``CELERY_TEST_BROKER_URL``, a queue
of their own), a real ``celery worker`` process of the sample on the test database,
and a dead loopback port as the "broker that is down".
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from config.celery import app as celery_app
from orders.models import DailySales, Order, OrderStatus, OutboxMessage, Receipt
from orders.outbox import outbox_purge_sent, outbox_relay
from payments.errors import OrderNotPayable
from payments.services import payment_pay
from tests.support import services
from tests.support.api_clients import KeyedAPIClient
from tests.support.factories import OrderFactory, funded_account
from tests.support.processes import stop_group
from tests.support.services import BROKER_URL, ROOT, broker_redis
from tests.support.storms import wait_until


def dead_broker_url() -> str:
    """A Redis URL on a loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


# The app's settings go by the Django settings' names (CELERY_...): before Celery 5.5 a
# change under the short one (conf.broker_url = ...) lost to them, so they are changed so.
EAGER, BROKER = "CELERY_TASK_ALWAYS_EAGER", "CELERY_BROKER_URL"


@pytest.fixture
def real_publishing() -> Iterator[None]:
    """Publish for real (not eager) while the test runs; the app's broker is restored after."""
    conf = celery_app.conf
    saved = conf[EAGER], conf[BROKER]
    conf[EAGER] = False
    try:
        yield
    finally:
        conf[EAGER], conf[BROKER] = saved


@pytest.mark.django_db
class TestEnqueue:
    def test_a_payment_writes_its_event_in_its_own_transaction(self, user: User) -> None:
        funded_account("100.00", user=user)
        order = OrderFactory(user=user, amount=Decimal("40.00"))
        payment_pay(user=user, order_id=order.pk, pay_no="P-1")
        message = OutboxMessage.objects.get()
        assert (message.message_id, message.event, message.payload) == (
            f"order.paid:{order.pk}",
            "order.paid",
            {"order_id": order.pk},
        )

    def test_a_payment_that_rolls_back_leaves_no_event(self, user: User) -> None:
        funded_account("100.00", user=user)
        order = OrderFactory(user=user, status=OrderStatus.CANCELLED)
        with pytest.raises(OrderNotPayable):
            payment_pay(user=user, order_id=order.pk, pay_no="P-1")
        assert not OutboxMessage.objects.exists()

    def test_the_commit_relays_it_at_once_and_marks_it_sent(
        self, user: User, django_capture_on_commit_callbacks: Any
    ) -> None:
        funded_account("100.00", user=user)
        order = OrderFactory(user=user, amount=Decimal("40.00"))
        with django_capture_on_commit_callbacks(execute=True):
            payment_pay(user=user, order_id=order.pk, pay_no="P-1")
        message = OutboxMessage.objects.get()
        assert message.sent_at is not None and message.attempts == 1
        assert Receipt.objects.get().order_id == order.pk


@pytest.mark.django_db
def test_a_dead_broker_keeps_the_event_pending_and_the_payment_committed(
    api_client: APIClient,
    user: User,
    real_publishing: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    celery_app.conf[BROKER] = dead_broker_url()
    funded_account("100.00", user=user)
    order = OrderFactory(user=user, amount=Decimal("40.00"))
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post(f"/api/orders/{order.pk}/pay/", {"pay_no": "P-1"})
    assert response.status_code == 201  # the broker's absence is not the customer's problem
    message = OutboxMessage.objects.get()
    assert message.sent_at is None
    assert message.attempts == 1 and message.last_error
    result = outbox_relay()
    assert (result.sent, result.failed, result.pending) == (0, 1, 1)
    message.refresh_from_db()
    assert message.attempts == 2


@pytest.mark.django_db
def test_the_command_has_a_dry_run_and_a_summary(
    user: User, capsys: pytest.CaptureFixture[str]
) -> None:
    funded_account("100.00", user=user)
    payment_pay(user=user, order_id=OrderFactory(user=user).pk, pay_no="P-1")
    call_command("relay_outbox", "--dry-run")
    assert capsys.readouterr().out.strip() == "relay_outbox: 1 pending (dry run)"
    call_command("relay_outbox")  # eager here: published in-process
    assert capsys.readouterr().out.strip() == "relay_outbox: 1 sent, 0 failed, 0 pending"
    assert Receipt.objects.count() == 1


@pytest.mark.django_db
def test_sent_messages_are_purged_after_their_retention_and_pending_ones_never(
    capsys: pytest.CaptureFixture[str],
) -> None:
    now = timezone.now()
    old_sent = OutboxMessage.objects.create(message_id="m-1", event="e", sent_at=now)
    recent_sent = OutboxMessage.objects.create(message_id="m-2", event="e", sent_at=now)
    old_pending = OutboxMessage.objects.create(message_id="m-3", event="e")
    OutboxMessage.objects.filter(pk__in=[old_sent.pk, old_pending.pk]).update(
        created_at=now - timedelta(days=30)
    )
    OutboxMessage.objects.filter(pk=old_sent.pk).update(sent_at=now - timedelta(days=8))
    assert outbox_purge_sent(older_than=timedelta(days=7), batch_size=1) == 1
    assert set(OutboxMessage.objects.values_list("pk", flat=True)) == {
        recent_sent.pk,
        old_pending.pk,
    }
    OutboxMessage.objects.filter(pk=recent_sent.pk).update(sent_at=now - timedelta(days=2))
    call_command("relay_outbox", "--max-batches", "0", "--purge-sent-days", "1")
    assert capsys.readouterr().out.strip().endswith(", 1 purged")
    assert list(OutboxMessage.objects.values_list("pk", flat=True)) == [old_pending.pk]


# -- a real broker and a real worker ---------------------------------------------------


class SampleWorker:
    """``celery -A config worker --pool=solo`` on the test database and a queue of its own."""

    def __init__(self, queue: str, log: Path) -> None:
        self.queue = queue
        self.log = log
        env = sample_env()
        with log.open("ab") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo"]
                + ["-Q", queue, "-n", f"{queue}@%h", "--loglevel=INFO"]
                + ["--without-gossip", "--without-mingle", "--without-heartbeat"],
                cwd=ROOT,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        ready = wait_until(
            lambda: " ready." in self.output() or self.process.poll() is not None, timeout=60
        )
        if not ready or self.process.poll() is not None:
            self.stop()
            pytest.fail(f"the sample's celery worker did not start:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        stop_group(self.process)


def sample_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=services.tests_database_url(),
        CELERY_BROKER_URL=BROKER_URL,
        CONN_MAX_AGE="0",
        IDEMPOTENCY_TEST_WORKER="1",  # tests/settings.py: no ledger database
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    )
    return env


@pytest.fixture
def worker(transactional_db: None, tmp_path: Path) -> Iterator[SampleWorker]:
    broker = broker_redis()
    queue = f"outbox-{uuid.uuid4().hex[:12]}"
    started = SampleWorker(queue, tmp_path / "worker.log")
    try:
        yield started
    finally:
        started.stop()
        for name in broker.scan_iter(match=f"*{queue}*"):
            broker.delete(name)


def pay_orders_while_the_broker_is_down(count: int) -> list[Order]:
    """Pay ``count`` orders through the API while every publish hits a dead port."""
    celery_app.conf[BROKER] = dead_broker_url()
    orders = []
    for index in range(count):
        account = funded_account("100.00")
        order = OrderFactory(user=account.user, amount=Decimal("10.00") + index)
        client = KeyedAPIClient()
        client.force_authenticate(user=account.user)
        response = client.post(f"/api/orders/{order.pk}/pay/", {"pay_no": f"P-{index}"})
        assert response.status_code == 201, response.content
        orders.append(order)
    pending = OutboxMessage.objects.filter(sent_at__isnull=True)
    assert pending.count() == count  # every on-commit publish failed, nothing was lost
    assert all(attempts >= 1 for attempts in pending.values_list("attempts", flat=True))
    return orders


def sales_total() -> tuple[int, Decimal]:
    rows = DailySales.objects.values_list("orders", "total")
    return sum(o for o, _ in rows), sum((t for _, t in rows), Decimal("0.00"))


def wait_for_receipts(orders: list[Order], worker: SampleWorker) -> None:
    done = wait_until(lambda: Receipt.objects.count() >= len(orders), timeout=60)
    assert done, worker.output()[-4000:]


def assert_each_order_counted_once(orders: list[Order]) -> None:
    assert sorted(Receipt.objects.values_list("order_id", flat=True)) == sorted(
        o.pk for o in orders
    )
    assert sales_total() == (len(orders), sum((o.amount for o in orders), Decimal("0.00")))


def republish_and_drain(orders: list[Order], worker: SampleWorker, sentinel: Order) -> None:
    """Publish every message again (as a relay that died before marking them would), then a
    sentinel; once the solo worker handled the sentinel it handled every duplicate."""
    OutboxMessage.objects.update(sent_at=None)
    result = outbox_relay(broker_url=BROKER_URL, queue=worker.queue)
    assert result.sent == len(orders) + 1
    done = wait_until(lambda: Receipt.objects.filter(order=sentinel).exists(), timeout=60)
    assert done, worker.output()[-4000:]


@pytest.mark.server_db
@pytest.mark.redis
@pytest.mark.celery_worker
@pytest.mark.timeout(180)
def test_broker_down_during_payments_then_back_every_order_gets_one_receipt(
    worker: SampleWorker, real_publishing: None
) -> None:
    orders = pay_orders_while_the_broker_is_down(8)
    # the relay against the dead broker fails, keeps everything and records why
    result = outbox_relay(broker_url=dead_broker_url(), queue=worker.queue)
    assert (result.sent, result.failed, result.pending) == (0, 1, 8)
    assert Receipt.objects.count() == 0

    # the broker is back: one relay run publishes everything
    result = outbox_relay(broker_url=BROKER_URL, queue=worker.queue)
    assert (result.sent, result.failed, result.pending) == (8, 0, 0)
    wait_for_receipts(orders, worker)
    assert_each_order_counted_once(orders)

    # at least once means some messages arrive twice: the consumer dedups by message id
    sentinel = pay_orders_while_the_broker_is_down(1)[0]
    republish_and_drain(orders, worker, sentinel)
    assert_each_order_counted_once([*orders, sentinel])


@pytest.mark.server_db
@pytest.mark.redis
@pytest.mark.celery_worker
@pytest.mark.timeout(240)
def test_a_relay_killed_mid_batch_loses_nothing_and_doubles_nothing(
    worker: SampleWorker, real_publishing: None, tmp_path: Path
) -> None:
    orders = pay_orders_while_the_broker_is_down(20)
    command = [sys.executable, "manage.py", "relay_outbox", "--broker-url", BROKER_URL]
    command += ["--queue", worker.queue, "--throttle", "0.2", "--batch-size", "100"]
    with (tmp_path / "relay.log").open("ab") as output:
        relay = subprocess.Popen(
            command, cwd=ROOT, env=sample_env(), stdout=output, stderr=subprocess.STDOUT
        )
    try:
        started = wait_until(
            lambda: (
                OutboxMessage.objects.filter(sent_at__isnull=False).count() >= 3
                or relay.poll() is not None
            ),
            timeout=60,
        )
        assert started and relay.poll() is None, (tmp_path / "relay.log").read_text()
    finally:
        relay.send_signal(signal.SIGKILL)
        relay.wait(10)
    sent = OutboxMessage.objects.filter(sent_at__isnull=False).count()
    assert 3 <= sent < len(orders)  # killed mid-batch

    # the next runs publish the rest (and, at most, the one the dead relay had in hand,
    # once the server has noticed the dead connection and freed its row lock)
    published: list[int] = []

    def drain() -> bool:
        result = outbox_relay(broker_url=BROKER_URL, queue=worker.queue)
        assert result.failed == 0
        published.append(result.sent)
        return result.pending == 0

    assert wait_until(drain, timeout=30, interval=0.2)
    assert sum(published) == len(orders) - sent
    wait_for_receipts(orders, worker)
    sentinel = pay_orders_while_the_broker_is_down(1)[0]
    republish_and_drain(orders, worker, sentinel)
    assert_each_order_counted_once([*orders, sentinel])
