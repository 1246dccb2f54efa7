"""Services of the payments app: one payment per pay number, all effects or none."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from accounts.errors import InsufficientFunds
from accounts.models import Account, LedgerEntry, LedgerEntryKind
from accounts.services import account_deposit
from orders.errors import OrderNotFound
from orders.models import Order, OrderStatus
from payments import services
from payments.errors import InvalidPayNo, OrderNotPayable, PaymentConflict
from payments.models import PaymentRecord, PaymentStatus
from payments.services import payment_pay
from tests.support.factories import OrderFactory, UserFactory, funded_account

pytestmark = pytest.mark.django_db


@pytest.fixture
def account() -> Account:
    return funded_account("100.00")


@pytest.fixture
def order(account: Account) -> Order:
    return OrderFactory(user=account.user, amount=Decimal("30.00"))


def deductions() -> int:
    return LedgerEntry.objects.filter(kind=LedgerEntryKind.DEDUCTION).count()


def test_pay_records_moves_and_deducts(account: Account, order: Order) -> None:
    record, created = payment_pay(user=account.user, order_id=order.pk, pay_no="P-1")
    assert created is True
    assert (record.pay_no, record.order_id, record.user_id) == ("P-1", order.pk, account.user_id)
    assert (record.amount, record.status) == (Decimal("30.00"), PaymentStatus.SUCCEEDED)
    assert record.ledger_reference == "pay_P-1"
    order.refresh_from_db()
    assert order.status == OrderStatus.PAID
    assert order.paid_at is not None
    account.refresh_from_db()
    assert account.balance == Decimal("70.00")
    assert account.version == 2
    entry = LedgerEntry.objects.get(reference="pay_P-1")
    assert (entry.amount, entry.balance_after) == (Decimal("-30.00"), Decimal("70.00"))


def test_repeat_returns_the_first_payment_and_pays_once(account: Account, order: Order) -> None:
    first, _ = payment_pay(user=account.user, order_id=order.pk, pay_no="P-1")
    again, created = payment_pay(user=account.user, order_id=order.pk, pay_no="P-1")
    assert created is False
    assert again.pk == first.pk
    assert again.created_at == first.created_at
    account.refresh_from_db()
    assert account.balance == Decimal("70.00")
    assert deductions() == 1


def test_pay_no_of_another_order_is_a_conflict(account: Account, order: Order) -> None:
    payment_pay(user=account.user, order_id=order.pk, pay_no="P-1")
    other = OrderFactory(user=account.user)
    with pytest.raises(PaymentConflict):
        payment_pay(user=account.user, order_id=other.pk, pay_no="P-1")
    other.refresh_from_db()
    assert other.status == OrderStatus.CREATED


def test_another_users_order_is_not_found_before_the_pay_no_is_looked_at(
    account: Account, order: Order
) -> None:
    payment_pay(user=account.user, order_id=order.pk, pay_no="P-1")
    with pytest.raises(OrderNotFound):
        payment_pay(user=UserFactory(), order_id=order.pk, pay_no="P-1")
    with pytest.raises(OrderNotFound):
        payment_pay(user=UserFactory(), order_id=order.pk, pay_no="P-fresh")


def test_pay_numbers_are_per_user(account: Account, order: Order) -> None:
    payment_pay(user=account.user, order_id=order.pk, pay_no="P-1")
    other = funded_account(Decimal("50.00"))
    their_order = OrderFactory(user=other.user, amount=Decimal("5.00"))
    record, created = payment_pay(user=other.user, order_id=their_order.pk, pay_no="P-1")
    assert created is True
    assert (record.user_id, record.order_id) == (other.user_id, their_order.pk)


def test_the_callers_pay_no_of_another_order_is_a_conflict(account: Account, order: Order) -> None:
    payment_pay(user=account.user, order_id=order.pk, pay_no="P-1")
    second = OrderFactory(user=account.user, amount=Decimal("1.00"))
    with pytest.raises(PaymentConflict):
        payment_pay(user=account.user, order_id=second.pk, pay_no="P-1")


def test_second_pay_no_for_a_paid_order_is_not_payable(account: Account, order: Order) -> None:
    payment_pay(user=account.user, order_id=order.pk, pay_no="P-1")
    with pytest.raises(OrderNotPayable) as excinfo:
        payment_pay(user=account.user, order_id=order.pk, pay_no="P-2")
    assert excinfo.value.status == OrderStatus.PAID
    assert not PaymentRecord.objects.filter(pay_no="P-2").exists()
    account.refresh_from_db()
    assert account.balance == Decimal("70.00")
    assert deductions() == 1


def test_cancelled_order_is_not_payable(account: Account) -> None:
    order = OrderFactory(user=account.user, status=OrderStatus.CANCELLED)
    with pytest.raises(OrderNotPayable):
        payment_pay(user=account.user, order_id=order.pk, pay_no="P-1")
    assert PaymentRecord.objects.count() == 0


def test_insufficient_funds_rolls_everything_back_and_may_be_retried(account: Account) -> None:
    order = OrderFactory(user=account.user, amount=Decimal("150.00"))
    with pytest.raises(InsufficientFunds):
        payment_pay(user=account.user, order_id=order.pk, pay_no="P-big")
    assert PaymentRecord.objects.count() == 0
    order.refresh_from_db()
    assert (order.status, order.paid_at) == (OrderStatus.CREATED, None)
    account.refresh_from_db()
    assert (account.balance, account.version) == (Decimal("100.00"), 1)

    account_deposit(account_id=account.pk, amount=Decimal("50.00"), reference="top-up")
    record, created = payment_pay(user=account.user, order_id=order.pk, pay_no="P-big")
    assert created is True
    account.refresh_from_db()
    assert account.balance == Decimal("0.00")


def test_user_without_account_cannot_pay() -> None:
    order = OrderFactory(amount=Decimal("1.00"))
    with pytest.raises(InsufficientFunds):
        payment_pay(user=order.user, order_id=order.pk, pay_no="P-1")
    assert PaymentRecord.objects.count() == 0


def test_order_of_another_user_is_not_found(order: Order) -> None:
    with pytest.raises(OrderNotFound):
        payment_pay(user=UserFactory(), order_id=order.pk, pay_no="P-1")
    with pytest.raises(OrderNotFound):
        payment_pay(user=order.user, order_id=987654, pay_no="P-1")


def test_unique_pay_no_decides_a_race(
    account: Account, order: Order, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other request's record, invisible to our look-up, wins at the insert."""
    first, _ = payment_pay(user=account.user, order_id=order.pk, pay_no="P-1")
    real_lookup = services._payment_by_pay_no
    calls: list[str] = []

    def miss_once(*, user: Any, pay_no: str) -> PaymentRecord | None:
        calls.append(pay_no)
        return None if len(calls) == 1 else real_lookup(user=user, pay_no=pay_no)

    monkeypatch.setattr(services, "_payment_by_pay_no", miss_once)
    again, created = payment_pay(user=account.user, order_id=order.pk, pay_no="P-1")
    assert len(calls) == 2
    assert (again.pk, created) == (first.pk, False)
    assert deductions() == 1


@pytest.mark.parametrize("pay_no", ["", "x" * 61, "has space", "ü", "a/b", None])
def test_invalid_pay_numbers_are_rejected(account: Account, order: Order, pay_no: Any) -> None:
    with pytest.raises(InvalidPayNo):
        payment_pay(user=account.user, order_id=order.pk, pay_no=pay_no)


def test_longest_pay_no_fits_the_ledger_reference(account: Account, order: Order) -> None:
    record, _ = payment_pay(user=account.user, order_id=order.pk, pay_no="p" * 60)
    assert len(record.ledger_reference) == 64
