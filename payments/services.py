"""Writes of the payments app.

Paying is one ``transaction.atomic()`` block with three effects:

1. insert the :class:`PaymentRecord` (its ``pay_no`` is unique; a concurrent
   insert of the same number makes ours fail, and we answer with theirs),
2. move the order CREATED -> PAID (a conditional update: of two payments of
   one order only one can make the move; the other is :class:`OrderNotPayable`),
3. deduct the amount from the payer's account under the ledger reference
   ``pay_<pay_no>`` (version-checked, at most once per reference).

Any failure (not payable, insufficient funds, ...) rolls all three back, the
record included, so a failed payment leaves nothing behind and may be retried
with the same pay number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from accounts.money import identifier_pattern
from accounts.services import account_deduct, account_get_or_create_for_user
from orders.errors import IllegalTransition, OrderNotFound
from orders.models import OrderStatus
from orders.selectors import order_get
from orders.services import order_transition
from payments.errors import InvalidPayNo, OrderNotPayable, PaymentConflict
from payments.models import PaymentRecord, PaymentStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import User

#: 60, not 64: the ledger reference ``pay_<pay_no>`` must fit the ledger's 64 characters.
PAY_NO_MAX_LENGTH = 60
PAY_NO_PATTERN = identifier_pattern(PAY_NO_MAX_LENGTH)
LEDGER_REFERENCE_PREFIX = "pay_"


def payment_pay(*, user: User, order_id: int, pay_no: str) -> tuple[PaymentRecord, bool]:
    """Pay the user's order once per ``pay_no``; the record and whether this call made it.

    A repeat with the same ``pay_no`` (same user and order) returns the first
    record and changes nothing. Raises :class:`PaymentConflict` when ``pay_no``
    paid something else, :class:`OrderNotPayable` when the order is not CREATED
    (for instance already paid under another number), ``OrderNotFound`` and the
    accounts errors (``InsufficientFunds``, ...), each after rolling back.
    """
    if not isinstance(pay_no, str) or not PAY_NO_PATTERN.fullmatch(pay_no):
        raise InvalidPayNo(str(pay_no))
    with transaction.atomic():
        existing = _payment_by_pay_no(pay_no)
        if existing is not None:
            return _same_payment(existing, user=user, order_id=order_id), False
        order = order_get(user=user, order_id=order_id)
        if order is None:
            raise OrderNotFound(order_id)
        try:
            with transaction.atomic():
                record = PaymentRecord.objects.create(
                    pay_no=pay_no,
                    order=order,
                    user=user,
                    amount=order.amount,
                    status=PaymentStatus.SUCCEEDED,
                    ledger_reference=f"{LEDGER_REFERENCE_PREFIX}{pay_no}",
                )
        except IntegrityError:
            # A concurrent request with this pay number inserted first (and committed).
            existing = _payment_by_pay_no(pay_no)
            if existing is None:
                raise
            return _same_payment(existing, user=user, order_id=order_id), False
        try:
            order_transition(
                order_id=order.pk,
                to=OrderStatus.PAID,
                expected_from={OrderStatus.CREATED},
                allow_repeat=False,
            )
        except IllegalTransition as exc:
            raise OrderNotPayable(order.pk, exc.current) from exc
        account = account_get_or_create_for_user(user=user)
        account_deduct(
            account_id=account.pk, amount=order.amount, reference=record.ledger_reference
        )
        # Read back what the database holds: the first answer equals every repeat's.
        record.refresh_from_db()
    return record, True


def _payment_by_pay_no(pay_no: str) -> PaymentRecord | None:
    return PaymentRecord.objects.filter(pay_no=pay_no).first()


def _same_payment(existing: PaymentRecord, *, user: User, order_id: int) -> PaymentRecord:
    if existing.user_id != user.pk or existing.order_id != order_id:
        raise PaymentConflict(existing.pay_no)
    return existing
