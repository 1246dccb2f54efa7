"""Naive read-modify-write versions of the sample services, for the concurrency tests only.

Each looks right and passes every single-threaded test, and each is wrong
under concurrency: it reads a row, decides in Python, and writes later. The
concurrency tests run them next to the real services and assert that they
break the invariants the real ones keep, so a concurrency test that stops
catching races (too few threads, no overlap, ...) turns the suite red.

Between the read and the write each waits for the others at the barrier that
:func:`racing` sets up (the work a real request does in between, stretched until
every thread has read): every thread reads before any writes, so the races show on
every run, on any machine, with no sleep. The real services have no such pause.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from decimal import Decimal
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from accounts.errors import InsufficientFunds
from accounts.models import Account, LedgerEntry, LedgerEntryKind
from orders.models import Order, OrderStatus
from payments.errors import OrderNotPayable
from payments.models import PaymentRecord, PaymentStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import User

_race: threading.Barrier | None = None


@contextmanager
def racing(threads: int) -> Iterator[None]:
    """While it lasts, the naive services hold each caller between its read and its write
    until ``threads`` callers have read."""
    global _race
    _race = threading.Barrier(threads, timeout=60)
    try:
        yield
    finally:
        _race = None


def _all_have_read() -> None:
    if _race is not None:
        # a broken barrier (a caller that never read): race anyway
        with suppress(threading.BrokenBarrierError):
            _race.wait()


def naive_order_create(*, user: User, request_id: str, amount: Decimal) -> tuple[Order, bool]:
    """Check, then insert, with no fallback: the losers of the race get an IntegrityError."""
    existing = Order.objects.filter(request_id=request_id).first()
    if existing is not None:
        return existing, False
    _all_have_read()
    return Order.objects.create(request_id=request_id, user=user, amount=amount), True


def naive_account_deduct(*, account_id: int, amount: Decimal, reference: str) -> LedgerEntry:
    """Read the balance, check it in Python, ``save()`` the result: no version check."""
    with transaction.atomic():
        account = Account.objects.get(pk=account_id)
        if account.balance < amount:
            raise InsufficientFunds(account_id, account.balance, amount)
        _all_have_read()
        return _deduct(account, amount, reference)


def _deduct(account: Account, amount: Decimal, reference: str) -> LedgerEntry:
    """Write what was decided from ``account`` as read: its balance less ``amount``."""
    account.balance -= amount
    account.version += 1
    account.save()
    return LedgerEntry.objects.create(
        account=account,
        amount=-amount,
        balance_after=account.balance,
        reference=reference,
        kind=LedgerEntryKind.DEDUCTION,
    )


def naive_payment_pay(*, user: User, order_id: int, pay_no: str) -> tuple[PaymentRecord, bool]:
    """Read the order's status in Python, then ``save()`` it as PAID: no conditional update."""
    with transaction.atomic():
        existing = PaymentRecord.objects.filter(pay_no=pay_no).first()
        if existing is not None:
            return existing, False
        order = Order.objects.get(pk=order_id, user=user)
        if order.status != OrderStatus.CREATED:
            raise OrderNotPayable(order.pk, order.status)
        _all_have_read()
        order.status = OrderStatus.PAID
        order.paid_at = timezone.now()
        order.save()
        record = PaymentRecord.objects.create(
            pay_no=pay_no,
            order=order,
            user=user,
            amount=order.amount,
            status=PaymentStatus.SUCCEEDED,
            ledger_reference=f"pay_{pay_no}",
        )
        # no second wait here: the callers behind this one are blocked on the order's row,
        # which this transaction holds, so a barrier would only stall until its timeout
        _deduct(Account.objects.get(user=user), order.amount, record.ledger_reference)
        return record, True
