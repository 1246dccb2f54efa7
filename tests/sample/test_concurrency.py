"""Real concurrency on PostgreSQL: many threads, one barrier, committed transactions.

Every test runs twice: with the real service, whose invariants must hold, and
with a naive read-modify-write variant from :mod:`tests.support.naive`, marked
``xfail(strict=True)``: it must break the same invariants, or the test has
lost its teeth and the suite goes red. The numbers of double effects seen are
printed (``-s`` not needed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any, TypeVar

import pytest

from accounts.errors import AccountConflict, InsufficientFunds
from accounts.models import LedgerEntry, LedgerEntryKind
from accounts.services import account_deduct, account_deposit
from orders.models import Order, OrderStatus
from orders.services import order_create
from payments.errors import OrderNotPayable
from payments.models import PaymentRecord
from payments.services import payment_pay
from tests.support import naive
from tests.support.factories import OrderFactory, UserFactory, funded_account
from tests.support.storms import run_threads

pytestmark = [pytest.mark.server_db, pytest.mark.django_db(transaction=True)]

THREADS = 20
T = TypeVar("T")


@pytest.fixture(autouse=True)
def _naive_callers_race() -> Iterator[None]:
    """The naive variants' callers all read before any writes (the real ones never wait)."""
    with naive.racing(THREADS):
        yield


@pytest.fixture
def report(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[[str], None]]:
    lines: list[str] = []
    yield lines.append
    with capsys.disabled():
        for line in lines:
            print(f"\n    [concurrency] {line}", end="")


def naive_param(func: Callable[..., Any]) -> Any:
    return pytest.param(
        func,
        id="naive",
        marks=pytest.mark.xfail(strict=True, reason="read-modify-write races"),
    )


@pytest.mark.parametrize(
    "create", [pytest.param(order_create, id="real"), naive_param(naive.naive_order_create)]
)
def test_concurrent_creates_of_one_request_id_make_one_order(
    create: Callable[..., tuple[Order, bool]], report: Callable[[str], None]
) -> None:
    user = UserFactory()
    results = run_threads(
        THREADS,
        lambda i: create(user=user, request_id="one-request", amount=Decimal("10.00")),
    )
    errors = [r for r in results if isinstance(r, Exception)]
    answers = [r for r in results if not isinstance(r, Exception)]
    report(
        f"order_create via {create.__module__}: {Order.objects.count()} order row(s), "
        f"{sum(created for _, created in answers)} creator(s), {len(errors)} caller(s) "
        f"failed ({sorted({type(e).__name__ for e in errors})})"
    )
    assert Order.objects.count() == 1
    assert errors == []
    assert {order.pk for order, _ in answers} == {Order.objects.get().pk}
    assert sum(created for _, created in answers) == 1


@pytest.mark.parametrize(
    "pay", [pytest.param(payment_pay, id="real"), naive_param(naive.naive_payment_pay)]
)
def test_concurrent_payments_of_one_order_pay_once(
    pay: Callable[..., tuple[PaymentRecord, bool]], report: Callable[[str], None]
) -> None:
    account = funded_account("1000.00")
    order = OrderFactory(user=account.user, amount=Decimal("10.00"))
    results = run_threads(
        THREADS, lambda i: pay(user=account.user, order_id=order.pk, pay_no=f"P-{i}")
    )
    paid = [r for r in results if isinstance(r, tuple)]
    not_payable = [r for r in results if isinstance(r, OrderNotPayable)]
    unexpected = [r for r in results if isinstance(r, Exception) and r not in not_payable]
    records = PaymentRecord.objects.count()
    deductions = LedgerEntry.objects.filter(kind=LedgerEntryKind.DEDUCTION).count()
    account.refresh_from_db()
    order.refresh_from_db()
    report(
        f"payment_pay via {pay.__module__}: {records} payment record(s), {deductions} "
        f"deduction(s), balance 1000.00 -> {account.balance}, {len(paid)} paid, "
        f"{len(not_payable)} not payable; double charges: {max(deductions - 1, 0)}"
    )
    assert unexpected == []
    assert records == 1
    assert deductions == 1
    assert account.balance == Decimal("990.00")
    assert (len(paid), len(not_payable)) == (1, THREADS - 1)
    assert order.status == OrderStatus.PAID


@pytest.mark.parametrize(
    "deduct", [pytest.param(account_deduct, id="real"), naive_param(naive.naive_account_deduct)]
)
def test_concurrent_deductions_keep_the_books_balanced(
    deduct: Callable[..., LedgerEntry], report: Callable[[str], None]
) -> None:
    account = funded_account("100.00")  # version 1: one deposit
    results = run_threads(
        THREADS,
        lambda i: deduct(account_id=account.pk, amount=Decimal("7.00"), reference=f"d-{i}"),
    )
    succeeded = [r for r in results if isinstance(r, LedgerEntry)]
    insufficient = [r for r in results if isinstance(r, InsufficientFunds)]
    conflicts = [r for r in results if isinstance(r, AccountConflict)]
    unexpected = [r for r in results if isinstance(r, Exception)]
    unexpected = [r for r in unexpected if r not in insufficient and r not in conflicts]
    account.refresh_from_db()
    entries = LedgerEntry.objects.filter(account=account)
    deductions = entries.filter(kind=LedgerEntryKind.DEDUCTION)
    ledger_sum = sum((e.amount for e in entries), Decimal("0"))
    taken = Decimal("100.00") - account.balance
    report(
        f"account_deduct via {deduct.__module__}: {len(succeeded)} succeeded, "
        f"{len(insufficient)} insufficient, {len(conflicts)} gave up; balance 100.00 -> "
        f"{account.balance} (version {account.version}); ledger says {-ledger_sum + 100} "
        f"taken; deductions recorded but not taken (lost updates): "
        f"{len(succeeded) - int(taken / Decimal('7.00'))}"
    )
    assert unexpected == []
    assert account.balance >= 0
    assert len(succeeded) == deductions.count()
    assert ledger_sum == account.balance
    assert account.version == entries.count()
    assert all(e.balance < Decimal("7.00") for e in insufficient)
    if not conflicts:
        assert account.balance == Decimal("2.00")


def test_concurrent_repeats_of_one_pay_no_pay_once(report: Callable[[str], None]) -> None:
    account = funded_account("1000.00")
    order = OrderFactory(user=account.user, amount=Decimal("10.00"))
    results = run_threads(
        THREADS, lambda i: payment_pay(user=account.user, order_id=order.pk, pay_no="P-same")
    )
    errors = [r for r in results if isinstance(r, Exception)]
    answers = [r for r in results if not isinstance(r, Exception)]
    account.refresh_from_db()
    report(
        f"payment_pay, one pay_no: {PaymentRecord.objects.count()} record(s), "
        f"{sum(created for _, created in answers)} creator(s), {len(errors)} error(s), "
        f"balance 1000.00 -> {account.balance}"
    )
    assert errors == []
    assert {record.pk for record, _ in answers} == {PaymentRecord.objects.get().pk}
    assert sum(created for _, created in answers) == 1
    assert LedgerEntry.objects.filter(kind=LedgerEntryKind.DEDUCTION).count() == 1
    assert account.balance == Decimal("990.00")


def test_concurrent_deposits_of_one_reference_deposit_once(
    report: Callable[[str], None],
) -> None:
    account = funded_account("1.00")
    results = run_threads(
        THREADS,
        lambda i: account_deposit(account_id=account.pk, amount=Decimal("5.00"), reference="same"),
    )
    errors = [r for r in results if isinstance(r, Exception)]
    entries = {r.pk for r in results if isinstance(r, LedgerEntry)}
    account.refresh_from_db()
    report(
        f"account_deposit, one reference: {len(entries)} distinct entr(y/ies), "
        f"{len(errors)} error(s), balance 1.00 -> {account.balance}"
    )
    assert errors == []
    assert entries == {LedgerEntry.objects.get(reference="same").pk}
    assert (account.balance, account.version) == (Decimal("6.00"), 2)
