"""The payment gateway's callback: signed, applied once per trade, every repeat answered alike
(what it refuses, unsigned or malformed, is in ``test_gateway_input.py``)."""

from __future__ import annotations

import json
import logging
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

import payments.apis
from accounts.models import Account, LedgerEntry
from idempotency import CallInProgress
from orders.models import DailySales, Order, OrderStatus, Receipt
from payments.apis import gateway_callback_handle
from payments.models import GatewayPayment, GatewayPaymentStatus, PaymentRecord
from payments.services import payment_pay
from tests.support.factories import OrderFactory, UserFactory, funded_account
from tests.support.gateway import callback, notification, signed_post
from tests.support.problems import assert_problem
from tests.support.stores import using
from tests.support.storms import run_threads

THREADS = 20


def balance(user: User) -> Decimal:
    return Account.objects.get(user=user).balance


@pytest.mark.django_db
class TestSuccess:
    def test_pays_the_order_and_records_the_trade_without_touching_the_balance(
        self,
        gateway: APIClient,
        order: Order,
        user: User,
        django_capture_on_commit_callbacks: Any,
    ) -> None:
        with django_capture_on_commit_callbacks(execute=True) as published:
            response = callback(gateway, **notification(order))
        assert response.status_code == 200, response.content
        assert response["Content-Type"] == "application/json"
        body = response.json()
        assert set(body) == {"trade_no", "order_id", "amount", "status", "created_at"}
        assert (body["trade_no"], body["order_id"], body["amount"], body["status"]) == (
            "T-1",
            order.pk,
            "25.00",
            "SUCCESS",
        )
        order.refresh_from_db()
        assert order.status == OrderStatus.PAID
        assert order.paid_at is not None
        payment = GatewayPayment.objects.get()
        assert (payment.trade_no, payment.order_id, payment.amount) == (
            "T-1",
            order.pk,
            order.amount,
        )
        assert balance(user) == Decimal("100.00")
        assert not PaymentRecord.objects.exists()
        # the order.paid message went out once the payment committed, and was consumed
        assert len(published) == 1
        assert Receipt.objects.get().order_id == order.pk
        sales = DailySales.objects.get()
        assert (sales.orders, sales.total) == (1, Decimal("25.00"))

    def test_every_repeat_answers_the_same_status_and_bytes_and_changes_nothing(
        self, gateway: APIClient, order: Order, django_capture_on_commit_callbacks: Any
    ) -> None:
        with django_capture_on_commit_callbacks(execute=True) as published:
            answers = [callback(gateway, **notification(order)) for _ in range(3)]
        first = answers[0]
        assert first.status_code == 200
        for again in answers[1:]:
            assert again.status_code == first.status_code
            assert again.content == first.content
            assert again["Content-Type"] == first["Content-Type"]
            assert "Idempotent-Replayed" not in again
        assert GatewayPayment.objects.count() == 1
        assert len(published) == 1
        assert DailySales.objects.get().orders == 1

    def test_a_repeat_after_the_key_expired_still_answers_the_same(
        self, gateway: APIClient, order: Order
    ) -> None:
        first = callback(gateway, **notification(order))
        # the stored answer is gone (TTL, a purge, a store that lost it): the unique
        # trade number in the database answers the repeat, identically
        assert gateway_callback_handle.forget(trade_no="T-1", order_id=0, amount=0, status="")
        again = callback(gateway, **notification(order))
        assert (again.status_code, again.content) == (first.status_code, first.content)
        assert GatewayPayment.objects.count() == 1

    def test_the_key_names_the_trade(self) -> None:
        assert gateway_callback_handle.idempotency_scope == "gateway"
        key = gateway_callback_handle.key_for(
            trade_no="T-9", order_id=1, amount=Decimal("1.00"), status="SUCCESS"
        )
        assert key == "pay_callback:T-9"

    def test_the_amount_must_be_a_json_string(self, gateway: APIClient, order: Order) -> None:
        response = callback(gateway, **notification(order, amount=25))
        body = assert_problem(response, 400, "validation-error")
        assert "amount" in body["errors"]
        assert not GatewayPayment.objects.exists()


@pytest.mark.django_db
class TestFailed:
    def test_records_the_notification_and_leaves_the_order_alone(
        self, gateway: APIClient, order: Order, django_capture_on_commit_callbacks: Any
    ) -> None:
        with django_capture_on_commit_callbacks(execute=True) as published:
            first = callback(gateway, **notification(order, status="FAILED"))
            again = callback(gateway, **notification(order, status="FAILED"))
        assert first.status_code == 200
        assert first.json()["status"] == "FAILED"
        assert again.content == first.content
        assert GatewayPayment.objects.get().status == GatewayPaymentStatus.FAILED
        order.refresh_from_db()
        assert (order.status, order.paid_at) == (OrderStatus.CREATED, None)
        assert published == []
        assert not DailySales.objects.exists()

    def test_a_later_trade_can_still_pay(self, gateway: APIClient, order: Order) -> None:
        callback(gateway, **notification(order, "T-1", status="FAILED"))
        paid = callback(gateway, **notification(order, "T-2"))
        assert paid.status_code == 200
        order.refresh_from_db()
        assert order.status == OrderStatus.PAID


@pytest.mark.django_db
class TestRefusals:
    def test_an_amount_mismatch_changes_nothing_and_every_repeat_gets_the_same_error(
        self, gateway: APIClient, order: Order
    ) -> None:
        first = callback(gateway, **notification(order, amount="24.99"))
        body = assert_problem(first, 422, "callback-amount-mismatch")
        assert "24.99" in body["detail"] and "25.00" in body["detail"]
        for _ in range(2):
            again = callback(gateway, **notification(order, amount="24.99"))
            assert (again.status_code, again.content) == (first.status_code, first.content)
        order.refresh_from_db()
        assert order.status == OrderStatus.CREATED
        assert not GatewayPayment.objects.exists()
        # nothing was stored under the trade: the right amount still pays
        assert callback(gateway, **notification(order)).status_code == 200

    def test_an_amount_mismatch_logs_a_hash_of_the_trade_never_the_trade_number(
        self, gateway: APIClient, order: Order, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Issue 43, finding 5: the trade number is the callback's key (key material)."""
        from idempotency.observability import key_hash

        sent = notification(order, trade_no="TRADE-4711-X", amount="24.99")
        with caplog.at_level(logging.WARNING, logger="payments"):
            assert callback(gateway, **sent).status_code == 422
        lines = [r.getMessage() for r in caplog.records if r.name.startswith("payments")]
        assert lines and all(key_hash(sent["trade_no"]) in line for line in lines)
        assert not [line for line in lines if sent["trade_no"] in line]

    def test_an_order_paid_from_the_balance_is_not_payable(
        self, gateway: APIClient, order: Order, user: User
    ) -> None:
        payment_pay(user=user, order_id=order.pk, pay_no="P-1")
        first = callback(gateway, **notification(order))
        assert_problem(first, 409, "order-not-payable")
        again = callback(gateway, **notification(order))
        assert (again.status_code, again.content) == (first.status_code, first.content)
        assert not GatewayPayment.objects.exists()
        assert balance(user) == Decimal("75.00")
        assert LedgerEntry.objects.filter(kind="deduction").count() == 1

    def test_an_order_paid_by_another_trade_is_not_payable(
        self, gateway: APIClient, order: Order
    ) -> None:
        assert callback(gateway, **notification(order, "T-1")).status_code == 200
        second = callback(gateway, **notification(order, "T-2"))
        assert_problem(second, 409, "order-not-payable")
        assert list(GatewayPayment.objects.values_list("trade_no", flat=True)) == ["T-1"]

    def test_a_cancelled_order_is_not_payable(self, gateway: APIClient, user: User) -> None:
        cancelled = OrderFactory(user=user, status=OrderStatus.CANCELLED)
        assert_problem(callback(gateway, **notification(cancelled)), 409, "order-not-payable")
        assert not GatewayPayment.objects.exists()

    def test_an_unknown_order_is_404(self, gateway: APIClient, order: Order) -> None:
        response = callback(gateway, **notification(order, order_id=order.pk + 1000))
        assert_problem(response, 404, "not-found")
        assert not GatewayPayment.objects.exists()

    @pytest.mark.parametrize("differs", ["status", "amount", "order"])
    def test_a_trade_number_notified_again_with_other_content_is_a_conflict(
        self, gateway: APIClient, order: Order, user: User, differs: str
    ) -> None:
        other = OrderFactory(user=user, amount=Decimal("26.00"))
        changes: dict[str, Any] = {
            "status": {"status": "FAILED"},
            "amount": {"amount": "26.00"},
            "order": {"order_id": other.pk, "amount": "26.00"},
        }[differs]
        first = callback(gateway, **notification(order))
        assert first.status_code == 200
        replayed = callback(gateway, **notification(order, **changes))
        assert_problem(replayed, 409, "trade-no-conflict")
        # and the same once the stored answer is gone: the database row decides
        gateway_callback_handle.forget(trade_no="T-1", order_id=0, amount=0, status="")
        from_row = callback(gateway, **notification(order, **changes))
        assert (from_row.status_code, from_row.content) == (409, replayed.content)
        assert callback(gateway, **notification(order)).content == first.content
        other.refresh_from_db()
        assert other.status == OrderStatus.CREATED
        assert GatewayPayment.objects.count() == 1

    def test_a_first_notification_still_running_after_the_wait_is_409_with_retry_after(
        self, gateway: APIClient, order: Order, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # lease-mode stores only: the repeat waited CALLBACK_WAIT_SECONDS in vain
        def still_running(**kwargs: Any) -> Any:
            raise CallInProgress("gateway", f"pay_callback:{kwargs['trade_no']}")

        monkeypatch.setattr(payments.apis, "gateway_callback_handle", still_running)
        response = callback(gateway, **notification(order))
        assert_problem(response, 409, "idempotency-request-in-progress")
        assert int(response["Retry-After"]) >= 1


@pytest.mark.django_db
def test_the_admin_lists_gateway_payments(gateway: APIClient, order: Order) -> None:
    callback(gateway, **notification(order))
    admin = Client()
    admin.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    changelist = reverse("admin:payments_gatewaypayment_changelist")
    assert admin.get(changelist, {"q": "T-1"}).status_code == 200
    payment = GatewayPayment.objects.get()
    assert (
        admin.get(reverse("admin:payments_gatewaypayment_change", args=[payment.pk])).status_code
        == 200
    )
    assert admin.get(reverse("admin:payments_gatewaypayment_add")).status_code == 403


# -- real concurrency (PostgreSQL) -------------------------------------------------------


def gateway_in_thread(body: bytes) -> Any:
    return signed_post(APIClient(raise_request_exception=False), body)


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "store",
    [
        pytest.param(None, id="database-store"),
        pytest.param(
            "idempotency.stores.redis.RedisStore", id="redis-store", marks=pytest.mark.redis
        ),
    ],
)
def test_twenty_concurrent_identical_callbacks_confirm_the_payment_once(
    user: User, store: str | None, settings: Any
) -> None:
    if store is not None:
        # lease mode: the duplicates wait for the first notification, then replay it
        settings.IDEMPOTENCY = {**settings.IDEMPOTENCY, **using(store)}
    funded_account("100.00", user=user)
    order = OrderFactory(user=user, amount=Decimal("25.00"))
    body = json.dumps(notification(order, "T-storm")).encode()

    responses = run_threads(THREADS, lambda i: gateway_in_thread(body))

    statuses = [getattr(r, "status_code", r) for r in responses]
    assert statuses == [200] * THREADS, statuses
    assert len({r.content for r in responses}) == 1
    assert GatewayPayment.objects.count() == 1
    order.refresh_from_db()
    assert order.status == OrderStatus.PAID
    # the order.paid effect happened once: one receipt, one sale counted
    assert Receipt.objects.count() == 1
    assert DailySales.objects.get().orders == 1
    assert Account.objects.get(user=user).balance == Decimal("100.00")


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
def test_concurrent_balance_payments_and_gateway_trades_pay_an_order_once(user: User) -> None:
    funded_account("100.00", user=user)
    order = OrderFactory(user=user, amount=Decimal("25.00"))

    def pay(index: int) -> Any:
        if index % 2:
            return gateway_in_thread(json.dumps(notification(order, f"T-{index}")).encode())
        try:
            payment_pay(user=user, order_id=order.pk, pay_no=f"P-{index}")
        except Exception as exc:
            return exc
        return "paid"

    results = run_threads(THREADS, pay)
    gateway_paid = [r for r in results if getattr(r, "status_code", None) == 200]
    balance_paid = [r for r in results if r == "paid"]
    refused = [r for r in results if getattr(r, "status_code", None) == 409]
    assert len(gateway_paid) + len(balance_paid) == 1, results
    assert len(refused) == THREADS // 2 - len(gateway_paid)
    assert all(json.loads(r.content)["code"] == "order-not-payable" for r in refused)
    assert GatewayPayment.objects.count() + PaymentRecord.objects.count() == 1
    expected_balance = Decimal("75.00") if balance_paid else Decimal("100.00")
    assert Account.objects.get(user=user).balance == expected_balance
    assert Order.objects.get(pk=order.pk).status == OrderStatus.PAID
    assert DailySales.objects.get().orders == 1
