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

A notification of the payment gateway (:func:`gateway_payment_record`) is the
same pattern without the deduction (the gateway took the money): insert the
:class:`GatewayPayment` (``trade_no`` unique; at most one SUCCESS per order),
then on SUCCESS move the order CREATED -> PAID, in one transaction.

Both publish ``order.paid`` once their transaction commits.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from accounts.models import LedgerEntry
from accounts.money import identifier_pattern, require_amount
from accounts.services import account_deduct, account_get_or_create_for_user, account_refund
from idempotency.observability import key_hash
from orders.errors import IllegalTransition, OrderNotFound
from orders.models import Order, OrderStatus
from orders.selectors import order_get, order_get_by_id
from orders.services import order_create, order_lock, order_paid_publish, order_transition
from payments.errors import (
    CallbackAmountMismatch,
    InvalidPayNo,
    InvalidTradeNo,
    OrderNotPayable,
    OrderNotRefundable,
    PaymentAlreadyRefunded,
    PaymentConflict,
    TradeNoConflict,
)
from payments.models import GatewayPayment, GatewayPaymentStatus, PaymentRecord, PaymentStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import User

#: 60, not 64: the ledger reference ``pay_<pay_no>`` must fit the ledger's 64 characters.
PAY_NO_MAX_LENGTH = 60
PAY_NO_PATTERN = identifier_pattern(PAY_NO_MAX_LENGTH)
LEDGER_REFERENCE_PREFIX = "pay_"
#: Ledger reference of a payment's refund: ``rf_<pay_no>`` (63 characters at most).
REFUND_REFERENCE_PREFIX = "rf_"
TRADE_NO_MAX_LENGTH = 64
TRADE_NO_PATTERN = identifier_pattern(TRADE_NO_MAX_LENGTH)

logger = logging.getLogger(__name__)


def payment_pay(*, user: User, order_id: int, pay_no: str) -> tuple[PaymentRecord, bool]:
    """Pay the user's order once per ``pay_no``; the record and whether this call made it.

    The order is looked up first, among the user's own: anyone else's order is
    ``OrderNotFound`` before anything else is checked. Pay numbers are unique per
    user, so another user's numbers are neither visible nor blocking. A repeat
    with the same ``pay_no`` (same order) returns the first record and changes
    nothing. Raises :class:`PaymentConflict` when the user's ``pay_no`` paid
    another order, :class:`OrderNotPayable` when the order is not CREATED (for
    instance already paid under another number) and the accounts errors
    (``InsufficientFunds``, ...), each after rolling back.
    """
    with transaction.atomic():
        order = order_get(user=user, order_id=order_id)
        if order is None:
            raise OrderNotFound(order_id)
        if not isinstance(pay_no, str) or not PAY_NO_PATTERN.fullmatch(pay_no):
            raise InvalidPayNo(str(pay_no))
        existing = _payment_by_pay_no(user=user, pay_no=pay_no)
        if existing is not None:
            return _same_payment(existing, order_id=order_id), False
        order_lock(order_id=order.pk)  # payments of one order queue here (see order_lock)
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
            existing = _payment_by_pay_no(user=user, pay_no=pay_no)
            if existing is None:
                raise
            return _same_payment(existing, order_id=order_id), False
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
        order_paid_publish(order_id=order.pk)
        # Read back what the database holds: the first answer equals every repeat's.
        record.refresh_from_db()
    return record, True


#: Prefix of the request ids of orders created by the shop's checkout (:func:`checkout_pay`).
CHECKOUT_REQUEST_ID_PREFIX = "co-"


def checkout_pay(*, user: User, checkout_id: str, amount: Decimal) -> tuple[Order, PaymentRecord]:
    """The shop's checkout: create the order and pay it, in one transaction, once per id.

    ``checkout_id`` names one checkout attempt (the page's idempotency key's reference,
    or the order form's token digest): the order's request id is ``co-<checkout_id>``
    and the pay number is ``checkout_id``, so even without the idempotency record the
    unique request id and pay number make a repeat find the same order and payment
    instead of making new ones. Any failure (insufficient funds, ...) rolls both back.
    """
    with transaction.atomic():
        order, _created = order_create(
            user=user, request_id=f"{CHECKOUT_REQUEST_ID_PREFIX}{checkout_id}", amount=amount
        )
        record, _paid = payment_pay(user=user, order_id=order.pk, pay_no=checkout_id)
        order.refresh_from_db()
    return order, record


def _payment_by_pay_no(*, user: User, pay_no: str) -> PaymentRecord | None:
    return PaymentRecord.objects.filter(user=user, pay_no=pay_no).first()


def _same_payment(existing: PaymentRecord, *, order_id: int) -> PaymentRecord:
    if existing.order_id != order_id:
        raise PaymentConflict(existing.pay_no)
    return existing


def payment_refund(*, order: Order) -> LedgerEntry:
    """Credit the balance payment of a just-cancelled order back to its payer, once.

    Runs inside the transaction that moved the order PAID -> CANCELLED (see
    :func:`orders.services.order_cancel`). Three guards, each enough on its own:
    the order's conditional status update (only one cancel moves it), the
    payment's ``SUCCEEDED -> REFUNDED`` conditional update, and the ledger's
    unique ``(account, "rf_<pay_no>")`` reference. The credit itself is the
    accounts app's version-checked update. Raises :class:`OrderNotRefundable`
    for an order paid through the gateway (the gateway holds that money).
    """
    record = PaymentRecord.objects.filter(order_id=order.pk).first()
    if record is None:
        raise OrderNotRefundable(order.pk)
    moved = PaymentRecord.objects.filter(pk=record.pk, status=PaymentStatus.SUCCEEDED).update(
        status=PaymentStatus.REFUNDED
    )
    if moved != 1:
        raise PaymentAlreadyRefunded(record.pay_no)
    account = account_get_or_create_for_user(user=record.user)
    return account_refund(
        account_id=account.pk,
        amount=record.amount,
        reference=f"{REFUND_REFERENCE_PREFIX}{record.pay_no}",
    )


def gateway_payment_record(
    *, trade_no: str, order_id: int, amount: Decimal, status: str
) -> GatewayPayment:
    """Apply the gateway's notification of ``trade_no`` once; the recorded notification.

    SUCCESS records it and moves the order CREATED -> PAID (no balance is touched:
    the gateway took the money); FAILED records it and leaves the order alone. A
    repeat (same trade, order, amount and status) returns the first record and
    changes nothing. Raises, each time changing nothing: ``OrderNotFound``;
    :class:`CallbackAmountMismatch` when ``amount`` is not the order's;
    :class:`OrderNotPayable` for a SUCCESS of an order that is not CREATED (paid
    from the balance or by another trade, cancelled); :class:`TradeNoConflict`
    when the trade was notified before with other content.
    """
    if not isinstance(trade_no, str) or not TRADE_NO_PATTERN.fullmatch(trade_no):
        raise InvalidTradeNo(str(trade_no))
    amount = require_amount(amount)
    if status not in GatewayPaymentStatus.values:
        raise ValueError(f"unknown gateway payment status {status!r}")
    with transaction.atomic():
        existing = _gateway_payment(trade_no)
        if existing is not None:
            return _same_notification(existing, order_id=order_id, amount=amount, status=status)
        order = order_get_by_id(order_id=order_id)
        if order is None:
            raise OrderNotFound(order_id)
        if amount != order.amount:
            logger.warning(  # the trade number is the callback's key: logged by its hash
                "gateway trade %s reports %s for order %s of %s: not applied",
                key_hash(trade_no),
                amount,
                order.pk,
                order.amount,
            )
            raise CallbackAmountMismatch(trade_no, order.pk, order.amount, amount)
        order_lock(order_id=order.pk)  # notifications of one order queue here
        try:
            with transaction.atomic():
                payment = GatewayPayment.objects.create(
                    trade_no=trade_no, order=order, amount=amount, status=status
                )
        except IntegrityError:
            # A concurrent notification of this trade committed first; or, for a
            # SUCCESS, another trade's SUCCESS paid this order first.
            existing = _gateway_payment(trade_no)
            if existing is not None:
                return _same_notification(existing, order_id=order_id, amount=amount, status=status)
            if status == GatewayPaymentStatus.SUCCESS:
                raise OrderNotPayable(order.pk, _order_status(order)) from None
            raise
        if status == GatewayPaymentStatus.SUCCESS:
            try:
                order_transition(
                    order_id=order.pk,
                    to=OrderStatus.PAID,
                    expected_from={OrderStatus.CREATED},
                    allow_repeat=False,
                )
            except IllegalTransition as exc:
                raise OrderNotPayable(order.pk, exc.current) from exc
            order_paid_publish(order_id=order.pk)
        # Read back what the database holds: the first answer equals every repeat's.
        payment.refresh_from_db()
    return payment


def _gateway_payment(trade_no: str) -> GatewayPayment | None:
    return GatewayPayment.objects.filter(trade_no=trade_no).first()


def _same_notification(
    existing: GatewayPayment, *, order_id: int, amount: Decimal, status: str
) -> GatewayPayment:
    if (existing.order_id, existing.amount, existing.status) != (order_id, amount, status):
        raise TradeNoConflict(existing.trade_no)
    return existing


def _order_status(order: Order) -> str:
    current = order_get_by_id(order_id=order.pk)
    return current.status if current is not None else order.status
