"""Refunds: cancelling a PAID order credits its payment back, once, with a ledger entry."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db.models import Sum
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry, LedgerEntryKind
from orders.errors import IllegalTransition
from orders.models import Order, OrderStatus
from orders.services import order_cancel, order_ship
from payments.models import PaymentRecord, PaymentStatus
from payments.services import gateway_payment_record, payment_pay
from tests.support.factories import OrderFactory, funded_account
from tests.support.problems import assert_problem
from tests.support.storms import run_threads

THREADS = 20
ORDERS = "/api/orders/"
LEDGER = "/api/accounts/me/ledger/"


def paid_order(user: User, amount: str = "40.00", pay_no: str = "PAY-3") -> Order:
    order = OrderFactory(user=user, amount=Decimal(amount))
    payment_pay(user=user, order_id=order.pk, pay_no=pay_no)
    order.refresh_from_db()
    return order


def totals(account: Account) -> dict[str, Decimal]:
    rows = (
        LedgerEntry.objects.filter(account=account)
        .values("kind")
        .annotate(total=Sum("amount"))
        .values_list("kind", "total")
    )
    found = {kind: Decimal(total).quantize(Decimal("0.01")) for kind, total in rows}
    return {kind: found.get(kind, Decimal("0.00")) for kind in LedgerEntryKind.values}


def assert_money_invariant(account: Account) -> None:
    """balance = deposits - payments + refunds, and the ledger adds up to the balance."""
    account.refresh_from_db()
    kinds = totals(account)
    deposits, payments, refunds = (
        kinds[LedgerEntryKind.DEPOSIT],
        -kinds[LedgerEntryKind.DEDUCTION],
        kinds[LedgerEntryKind.REFUND],
    )
    assert account.balance == deposits - payments + refunds
    assert account.version == LedgerEntry.objects.filter(account=account).count()


@pytest.mark.django_db
class TestCancelRefunds:
    def test_cancelling_a_paid_order_credits_the_payment_back(self, user: User) -> None:
        account = funded_account("100.00", user=user)
        order = paid_order(user)
        account.refresh_from_db()
        assert (account.balance, account.version) == (Decimal("60.00"), 2)

        cancelled = order_cancel(order_id=order.pk)

        assert cancelled.status == OrderStatus.CANCELLED
        account.refresh_from_db()
        assert (account.balance, account.version) == (Decimal("100.00"), 3)
        refund = LedgerEntry.objects.get(kind=LedgerEntryKind.REFUND)
        assert (refund.reference, refund.amount, refund.balance_after) == (
            "rf_PAY-3",
            Decimal("40.00"),
            Decimal("100.00"),
        )
        assert PaymentRecord.objects.get().status == PaymentStatus.REFUNDED
        assert_money_invariant(account)

    def test_a_repeated_cancel_refunds_nothing_more(self, user: User) -> None:
        account = funded_account("100.00", user=user)
        order = paid_order(user)
        first = order_cancel(order_id=order.pk)
        again = order_cancel(order_id=order.pk)
        assert (first.status, again.status) == (OrderStatus.CANCELLED, OrderStatus.CANCELLED)
        assert LedgerEntry.objects.filter(kind=LedgerEntryKind.REFUND).count() == 1
        account.refresh_from_db()
        assert account.balance == Decimal("100.00")

    def test_cancelling_an_unpaid_order_moves_no_money(self, user: User) -> None:
        account = funded_account("100.00", user=user)
        order = OrderFactory(user=user)
        assert order_cancel(order_id=order.pk).status == OrderStatus.CANCELLED
        account.refresh_from_db()
        assert (account.balance, account.version) == (Decimal("100.00"), 1)
        assert not LedgerEntry.objects.filter(kind=LedgerEntryKind.REFUND).exists()

    @pytest.mark.parametrize("status", [OrderStatus.SHIPPED, OrderStatus.COMPLETED])
    def test_a_shipped_order_cannot_be_cancelled_and_keeps_its_payment(
        self, user: User, status: str
    ) -> None:
        account = funded_account("100.00", user=user)
        order = paid_order(user)
        Order.objects.filter(pk=order.pk).update(status=status)
        with pytest.raises(IllegalTransition):
            order_cancel(order_id=order.pk)
        account.refresh_from_db()
        assert account.balance == Decimal("60.00")
        assert PaymentRecord.objects.get().status == PaymentStatus.SUCCEEDED

    def test_an_order_paid_through_the_gateway_is_refused_and_stays_paid(
        self, api_client: APIClient, user: User
    ) -> None:
        order = OrderFactory(user=user, amount=Decimal("12.50"))
        gateway_payment_record(
            trade_no="T-1", order_id=order.pk, amount=Decimal("12.50"), status="SUCCESS"
        )
        response = api_client.post(f"{ORDERS}{order.pk}/cancel/")
        assert_problem(response, 409, "order-not-refundable")
        order.refresh_from_db()
        assert order.status == OrderStatus.PAID
        assert not LedgerEntry.objects.filter(kind=LedgerEntryKind.REFUND).exists()

    def test_the_api_cancel_of_a_paid_order_refunds_and_its_repeat_answers_the_same(
        self, api_client: APIClient, user: User
    ) -> None:
        funded_account("100.00", user=user)
        order = paid_order(user)
        first = api_client.post(f"{ORDERS}{order.pk}/cancel/")
        again = api_client.post(f"{ORDERS}{order.pk}/cancel/")
        assert (first.status_code, again.status_code) == (200, 200)
        assert first.json()["status"] == "CANCELLED"
        assert again.content == first.content
        me = api_client.get("/api/accounts/me/").json()
        assert (me["balance"], me["version"]) == ("100.00", 3)

    def test_the_longest_pay_no_fits_the_refund_reference(self, user: User) -> None:
        funded_account("100.00", user=user)
        order = paid_order(user, pay_no="p" * 60)
        order_cancel(order_id=order.pk)
        refund = LedgerEntry.objects.get(kind=LedgerEntryKind.REFUND)
        assert refund.reference == "rf_" + "p" * 60

    def test_a_refund_reference_cannot_be_taken_by_a_deposit(self, api_client: APIClient) -> None:
        response = api_client.post(
            "/api/accounts/me/deposit/", {"amount": "1.00", "reference": "rf_PAY-3"}, format="json"
        )
        body = assert_problem(response, 400, "validation-error")
        assert "reference" in body["errors"]


@pytest.mark.django_db
class TestLedgerApi:
    def test_lists_deposits_payments_and_refunds_newest_first(
        self, api_client: APIClient, user: User
    ) -> None:
        funded_account("100.00", user=user)
        order = paid_order(user)
        order_cancel(order_id=order.pk)
        response = api_client.get(LEDGER)
        assert response.status_code == 200
        assert [
            (e["kind"], e["reference"], e["amount"], e["balance_after"]) for e in response.json()
        ] == [
            ("refund", "rf_PAY-3", "40.00", "100.00"),
            ("deduction", "pay_PAY-3", "-40.00", "60.00"),
            ("deposit", "initial", "100.00", "100.00"),
        ]

    def test_shows_only_the_callers_entries(
        self, api_client: APIClient, user: User, other_user: User
    ) -> None:
        funded_account("5.00", user=other_user)
        assert api_client.get(LEDGER).json() == []

    def test_anonymous_callers_are_refused(self, anon_client: APIClient) -> None:
        assert_problem(anon_client.get(LEDGER), 401, "not-authenticated")


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
class TestRefundConcurrency:
    def test_concurrent_cancels_of_one_paid_order_refund_once(self, user: User) -> None:
        account = funded_account("100.00", user=user)
        order = paid_order(user)
        results = run_threads(THREADS, lambda i: order_cancel(order_id=order.pk))
        assert [r for r in results if isinstance(r, Exception)] == []
        assert {r.status for r in results if isinstance(r, Order)} == {OrderStatus.CANCELLED}
        assert LedgerEntry.objects.filter(kind=LedgerEntryKind.REFUND).count() == 1
        account.refresh_from_db()
        assert (account.balance, account.version) == (Decimal("100.00"), 3)
        assert_money_invariant(account)

    def test_concurrent_api_cancels_refund_once(self, user: User) -> None:
        account = funded_account("100.00", user=user)
        order = paid_order(user)

        def cancel(_index: int) -> Any:
            client = APIClient()
            client.force_authenticate(user=user)
            return client.post(f"{ORDERS}{order.pk}/cancel/")

        responses = run_threads(THREADS, cancel)
        assert {getattr(r, "status_code", r) for r in responses} == {200}
        assert LedgerEntry.objects.filter(kind=LedgerEntryKind.REFUND).count() == 1
        assert_money_invariant(account)

    @pytest.mark.parametrize("round_", range(8))
    def test_a_cancel_racing_a_ship_ends_in_exactly_one_of_them(
        self, user: User, round_: int
    ) -> None:
        account = funded_account("100.00", user=user)
        order = paid_order(user, pay_no=f"PAY-{round_}")
        moves: list[Callable[[], Order]] = [
            lambda: order_cancel(order_id=order.pk),
            lambda: order_ship(order_id=order.pk),
        ]
        results = run_threads(2, lambda i: moves[i]())
        won = [isinstance(r, Order) for r in results]
        assert sum(won) == 1, results
        assert all(isinstance(r, IllegalTransition) for r in results if not isinstance(r, Order))
        order.refresh_from_db()
        account.refresh_from_db()
        refunds = LedgerEntry.objects.filter(kind=LedgerEntryKind.REFUND).count()
        if won[0]:
            assert (order.status, account.balance, refunds) == (
                OrderStatus.CANCELLED,
                Decimal("100.00"),
                1,
            )
        else:
            assert (order.status, account.balance, refunds) == (
                OrderStatus.SHIPPED,
                Decimal("60.00"),
                0,
            )
        assert_money_invariant(account)

    def test_the_money_invariant_holds_under_concurrent_payments_and_cancels(
        self, user: User
    ) -> None:
        account = funded_account("500.00", user=user)
        orders = [OrderFactory(user=user, amount=Decimal("7.25")) for _ in range(10)]

        def work(index: int) -> Any:
            order = orders[index % len(orders)]
            if index < THREADS // 2:
                return payment_pay(user=user, order_id=order.pk, pay_no=f"P-{order.pk}")
            return order_cancel(order_id=order.pk)

        run_threads(THREADS, work)
        for order in orders:  # whatever raced, cancel the rest: every payment comes back
            order_cancel(order_id=order.pk)
        assert_money_invariant(account)
        account.refresh_from_db()
        assert account.balance == Decimal("500.00")
        paid = PaymentRecord.objects.count()
        assert LedgerEntry.objects.filter(kind=LedgerEntryKind.REFUND).count() == paid
