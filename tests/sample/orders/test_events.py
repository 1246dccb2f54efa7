"""The ``order.paid`` message: published once a payment commits, consumed once per message id."""

from __future__ import annotations

import datetime
import logging
import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import orders.services
from idempotency import CallInProgress
from orders.models import DailySales, Order, OrderStatus, Receipt
from orders.services import order_paid_message_id, order_paid_record
from orders.tasks import SALES_CONSUMER, order_event_consume
from payments.errors import OrderNotPayable
from payments.services import payment_pay
from tests.support.factories import OrderFactory, UserFactory, funded_account
from tests.support.stores import REDIS_STORE, using
from tests.support.storms import run_threads

THREADS = 20
PAID_AT = datetime.datetime(2025, 3, 14, 23, 30, tzinfo=datetime.UTC)


def paid_order(amount: str = "12.50", **kwargs: Any) -> Order:
    kwargs.setdefault("paid_at", PAID_AT)
    order: Order = OrderFactory(amount=Decimal(amount), status=OrderStatus.PAID, **kwargs)
    return order


def deliver(order: Order, **options: Any) -> Any:
    """One delivery of the order's ``order.paid`` message (eager: in this process)."""
    kwargs = {
        "message_id": order_paid_message_id(order_id=order.pk),
        "event": "order.paid",
        "order_id": order.pk,
    }
    # an eager result never blocks: no join check (its flag is process-wide, and the
    # threads of the concurrent tests apply tasks at once)
    return order_event_consume.apply(kwargs=kwargs, **options).get(disable_sync_subtasks=False)


def sales() -> list[tuple[datetime.date, int, Decimal]]:
    return list(DailySales.objects.order_by("date").values_list("date", "orders", "total"))


@pytest.mark.django_db
class TestPublishing:
    def test_a_balance_payment_publishes_order_paid_once_it_commits(
        self, user: User, django_capture_on_commit_callbacks: Any
    ) -> None:
        account = funded_account("100.00", user=user)
        order = OrderFactory(user=account.user, amount=Decimal("40.00"))
        with django_capture_on_commit_callbacks(execute=True) as published:
            payment_pay(user=user, order_id=order.pk, pay_no="P-1")
            payment_pay(user=user, order_id=order.pk, pay_no="P-1")  # a repeat publishes nothing
        assert len(published) == 1
        order.refresh_from_db()
        receipt = Receipt.objects.get()
        assert (receipt.order_id, receipt.amount, receipt.paid_at) == (
            order.pk,
            Decimal("40.00"),
            order.paid_at,
        )
        assert sales() == [(timezone.now().astimezone(datetime.UTC).date(), 1, Decimal("40.00"))]

    def test_a_payment_that_rolls_back_publishes_nothing(
        self, user: User, django_capture_on_commit_callbacks: Any
    ) -> None:
        account = funded_account("100.00", user=user)
        order = OrderFactory(user=account.user, status=OrderStatus.CANCELLED)
        with (
            django_capture_on_commit_callbacks(execute=True) as published,
            pytest.raises(OrderNotPayable),
        ):
            payment_pay(user=user, order_id=order.pk, pay_no="P-1")
        assert published == []
        assert not Receipt.objects.exists()

    def test_the_message_id_names_the_event_and_the_order(self) -> None:
        assert order_paid_message_id(order_id=42) == "order.paid:42"


@pytest.mark.django_db
class TestConsuming:
    def test_a_message_delivered_twice_is_counted_once(self) -> None:
        order = paid_order()
        first = deliver(order)
        again = deliver(order)
        assert again == first
        assert first["handled"] is True
        assert sales() == [(datetime.date(2025, 3, 14), 1, Decimal("12.50"))]
        assert Receipt.objects.get().order_id == order.pk

    def test_redeliveries_under_new_task_ids_are_duplicates_too(self) -> None:
        order = paid_order()
        results = [deliver(order, task_id=str(uuid.uuid4())) for _ in range(3)]
        assert results[1:] == results[:1] * 2
        assert sales() == [(datetime.date(2025, 3, 14), 1, Decimal("12.50"))]

    def test_the_key_is_the_message_and_the_consumer(self) -> None:
        key = order_event_consume.get_idempotency_key(
            (), {"message_id": "order.paid:7", "event": "order.paid", "order_id": 7}
        )
        assert key == f"msg_order.paid:7_{SALES_CONSUMER}"

    def test_each_message_counts_on_the_day_its_order_was_paid(self) -> None:
        deliver(paid_order("10.00"))
        deliver(paid_order("2.25"))
        deliver(paid_order("1.00", paid_at=PAID_AT + datetime.timedelta(hours=1)))
        assert sales() == [
            (datetime.date(2025, 3, 14), 2, Decimal("12.25")),
            (datetime.date(2025, 3, 15), 1, Decimal("1.00")),
        ]

    def test_without_the_key_the_effect_would_count_twice(self) -> None:
        # the teeth of the tests above: the effect itself is not idempotent
        order = paid_order()
        order_paid_record(order_id=order.pk)
        order_paid_record(order_id=order.pk)
        assert sales() == [(datetime.date(2025, 3, 14), 2, Decimal("25.00"))]
        assert Receipt.objects.count() == 1  # the receipt is unique per order

    def test_a_failed_delivery_is_released_and_the_redelivery_counts_once(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        order = paid_order()
        real = orders.services.daily_sales_increment

        def broken(**kwargs: Any) -> Any:
            raise ConnectionError("the database went away")

        monkeypatch.setattr(orders.services, "daily_sales_increment", broken)
        with pytest.raises(ConnectionError):
            deliver(order)
        assert not Receipt.objects.exists()  # rolled back with the key
        monkeypatch.setattr(orders.services, "daily_sales_increment", real)
        deliver(order)
        deliver(order)
        assert sales() == [(datetime.date(2025, 3, 14), 1, Decimal("12.50"))]

    @pytest.mark.parametrize("event", ["order.shipped", "order.paid"])
    def test_other_events_and_unpaid_orders_are_acknowledged_and_ignored(self, event: str) -> None:
        unpaid = OrderFactory()
        result = order_event_consume.apply(
            kwargs={"message_id": f"{event}:{unpaid.pk}", "event": event, "order_id": unpaid.pk}
        ).get()
        assert result == {"handled": False}
        assert not DailySales.objects.exists()
        assert not Receipt.objects.exists()

    @pytest.mark.parametrize("event", ["order.shipped", "order.paid"])
    def test_the_consumer_logs_a_hash_of_the_message_id_never_the_id(
        self, event: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Issue 43, finding 5: message ids are key material (the key is built from
        them); the sample logged them as they are, in its own lines and in the result
        Celery logs."""
        from idempotency.observability import key_hash

        unpaid = OrderFactory()
        message_id = f"{event}:{unpaid.pk}:{uuid.uuid4()}"
        kwargs = {"message_id": message_id, "event": event, "order_id": unpaid.pk}
        with caplog.at_level(logging.DEBUG):
            order_event_consume.apply(kwargs=kwargs).get()
        lines = [r.getMessage() for r in caplog.records if r.name.startswith("orders")]
        assert lines and all(key_hash(message_id) in line for line in lines)
        assert not [r for r in caplog.records if message_id in r.getMessage()]

    def test_the_admin_shows_receipts_and_sales(self) -> None:
        deliver(paid_order())
        admin = Client()
        admin.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
        for model in ("receipt", "dailysales"):
            assert admin.get(reverse(f"admin:orders_{model}_changelist")).status_code == 200
            assert admin.get(reverse(f"admin:orders_{model}_add")).status_code == 403
        receipt = Receipt.objects.get()
        change = reverse("admin:orders_receipt_change", args=[receipt.pk])
        assert admin.get(change).status_code == 200


# -- real concurrency (PostgreSQL) -------------------------------------------------------


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_deliveries_of_one_message_count_once() -> None:
    order = paid_order()
    results = run_threads(THREADS, lambda i: deliver(order, task_id=str(uuid.uuid4())))
    errors = [r for r in results if isinstance(r, Exception)]
    assert errors == []
    # the database store: the duplicates waited on the key, then replayed the result
    assert all(r == results[0] for r in results)
    assert sales() == [(datetime.date(2025, 3, 14), 1, Decimal("12.50"))]
    assert Receipt.objects.count() == 1


@pytest.mark.server_db
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_deliveries_count_once_with_the_redis_store(settings: Any) -> None:
    settings.IDEMPOTENCY = {**settings.IDEMPOTENCY, **using(REDIS_STORE)}
    order = paid_order()
    results = run_threads(THREADS, lambda i: deliver(order, task_id=str(uuid.uuid4())))
    done = [r for r in results if isinstance(r, dict)]
    # lease mode: a duplicate that finds the message in progress is deferred (a worker
    # retries it later; an eager call raises), never run a second time
    deferred = [r for r in results if isinstance(r, CallInProgress)]
    assert len(done) + len(deferred) == THREADS, results
    assert all(r == done[0] for r in done)
    assert sales() == [(datetime.date(2025, 3, 14), 1, Decimal("12.50"))]
    assert deliver(order) == done[0]
