"""Writes of the orders app.

* Creating is idempotent per client ``request_id``, which is unique **per user**
  (another user's ids are neither visible nor blocking): look up, else insert in
  a savepoint and, when a concurrent request won the unique index, return its
  order. A repeat gets the same order; a request id reused for another amount
  is a :class:`OrderRequestConflict`, never a silent success.
* Moving an order is one conditional ``UPDATE ... WHERE id = ? AND status IN
  (<allowed sources>)`` judged by its row count. Zero rows means the order was
  not in a source status: when it already is in the target the move was done
  before and the repeat answers like the first; otherwise it is an
  :class:`IllegalTransition`.
* Checkout (a web form with a one-time submit token) creates the order under a
  request id derived from the token, so even the database refuses a second order
  for one form.
* Paying writes an ``order.paid`` message to the transactional outbox
  (:func:`order_paid_publish`, :mod:`orders.outbox`), relayed to the broker after
  the commit; its consumer (:mod:`orders.tasks`) writes the receipt and counts the
  sale (:func:`order_paid_record`), once per message id.
* Orders never import payments (payments build on orders): a cancelled paid order is
  announced with :data:`orders.signals.order_paid_cancelled`, which payments refund.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Collection
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.money import identifier_pattern, require_amount
from orders.errors import IllegalTransition, InvalidRequestId, OrderNotFound, OrderRequestConflict
from orders.models import DailySales, Order, OrderStatus, Receipt, transition_sources
from orders.outbox import outbox_enqueue, outbox_relay
from orders.selectors import order_get_by_id
from orders.signals import order_paid_cancelled

if TYPE_CHECKING:
    from django.contrib.auth.models import User

REQUEST_ID_PATTERN = identifier_pattern(64)

#: The event published when an order is paid (by balance or through the gateway).
ORDER_PAID = "order.paid"
#: Prefix of the request ids of orders created by checkout (see :func:`order_checkout`).
CHECKOUT_REQUEST_ID_PREFIX = "form-"


def order_create(*, user: User, request_id: str, amount: Decimal) -> tuple[Order, bool]:
    """The order named by ``request_id`` and whether this call created it."""
    if not isinstance(request_id, str) or not REQUEST_ID_PATTERN.fullmatch(request_id):
        raise InvalidRequestId(str(request_id))
    amount = require_amount(amount)
    with transaction.atomic():
        existing = _order_by_request_id(user=user, request_id=request_id)
        if existing is None:
            try:
                with transaction.atomic():
                    order = Order.objects.create(request_id=request_id, user=user, amount=amount)
            except IntegrityError:
                # A concurrent request of this user inserted this request id first.
                existing = _order_by_request_id(user=user, request_id=request_id)
                if existing is None:
                    raise
            else:
                # Read back what the database holds, so the first answer is
                # exactly what every repeat will be answered with.
                order.refresh_from_db()
                return order, True
        if existing.amount != amount:
            raise OrderRequestConflict(request_id)
        return existing, False


def _order_by_request_id(*, user: User, request_id: str) -> Order | None:
    # request ids are unique per user: another user's ids are neither seen nor blocking
    return Order.objects.filter(user=user, request_id=request_id).first()


def order_lock(*, order_id: int) -> None:
    """Lock the order's row until the transaction ends: a payment takes it before it
    inserts its record. On MySQL/MariaDB the record's foreign-key check share-locks the
    order row, so two payments of one order would both hold that lock and then both wait
    to move the order: a deadlock. Taken first, the exclusive lock queues them instead
    (on PostgreSQL, whose key-share lock does not block the move, it costs one statement).
    """
    list(Order.objects.select_for_update().filter(pk=order_id).values_list("pk", flat=True))


def order_transition(
    *,
    order_id: int,
    to: str,
    expected_from: Collection[str] | None = None,
    allow_repeat: bool = True,
) -> Order:
    """Move the order to ``to`` if the status table (and ``expected_from``) allows it.

    With ``allow_repeat`` (the default) an order that already is in ``to`` is
    returned as it is: the repeat of a done move answers like the first. Callers
    that must be the ones making the move (paying) pass ``allow_repeat=False``.
    """
    if to not in OrderStatus.values:
        raise ValueError(f"unknown order status {to!r}")
    sources = transition_sources(to)
    if expected_from is not None:
        sources &= frozenset(expected_from)
    now = timezone.now()
    changes: dict[str, Any] = {"status": to, "updated_at": now}
    if to == OrderStatus.PAID:
        changes["paid_at"] = now
    with transaction.atomic():
        updated = (
            Order.objects.filter(pk=order_id, status__in=sources).update(**changes)
            if sources
            else 0
        )
        order = Order.objects.filter(pk=order_id).first()
        if order is None:
            raise OrderNotFound(order_id)
        if updated == 1 or (allow_repeat and order.status == to):
            return order
        raise IllegalTransition(order_id, order.status, to)


def order_cancel(*, order_id: int) -> Order:
    """Cancel the order; a PAID order's payment is undone in the same transaction.

    CREATED -> CANCELLED moves nothing else. PAID -> CANCELLED sends
    :data:`~orders.signals.order_paid_cancelled` inside the move's transaction: the
    payments app (which builds on orders; orders never import it) credits the payment
    back to the payer's balance there, and a receiver's :class:`CancelRefused` rolls the
    move back. The conditional update of the order's status and the refund commit
    together, so of concurrent cancels (or a cancel racing a ship) exactly one makes the
    move and only that one refunds; the others find the order already CANCELLED (a
    repeat, answered like the first) or SHIPPED (an :class:`IllegalTransition`). A
    SHIPPED order cannot be cancelled.
    """
    for _attempt in range(2):
        with transaction.atomic():
            try:
                order = order_transition(
                    order_id=order_id,
                    to=OrderStatus.CANCELLED,
                    expected_from={OrderStatus.PAID},
                    allow_repeat=False,
                )
            except IllegalTransition:
                pass
            else:
                order_paid_cancelled.send(sender=Order, order=order)
                return order
        try:
            # never from PAID here: a cancel of a paid order must refund
            return order_transition(
                order_id=order_id, to=OrderStatus.CANCELLED, expected_from={OrderStatus.CREATED}
            )
        except IllegalTransition as exc:
            if exc.current != OrderStatus.PAID:
                raise
            # paid between our two updates: go round once more and refund
    raise IllegalTransition(order_id, OrderStatus.PAID, OrderStatus.CANCELLED)


def order_ship(*, order_id: int) -> Order:
    return order_transition(order_id=order_id, to=OrderStatus.SHIPPED)


def order_complete(*, order_id: int) -> Order:
    return order_transition(order_id=order_id, to=OrderStatus.COMPLETED)


def order_checkout(*, user: User, form_token: str, amount: Decimal) -> Order:
    """Create the order of a submitted order form.

    The form's one-time submit token was consumed before (``SubmitTokenPermission``:
    of two submissions only one gets here). The request id is a hash of the token,
    so the unique ``request_id`` would refuse a second order for the same form too.
    """
    digest = hashlib.sha256(f"order-form\x00{form_token}".encode()).hexdigest()[:40]
    order, _created = order_create(
        user=user, request_id=f"{CHECKOUT_REQUEST_ID_PREFIX}{digest}", amount=amount
    )
    return order


def order_paid_message_id(*, order_id: int) -> str:
    """The id of the ``order.paid`` message of an order (an order is paid at most once)."""
    return f"{ORDER_PAID}:{order_id}"


def order_paid_publish(*, order_id: int) -> str:
    """Announce ``order.paid``: write it to the outbox in the current transaction.

    The message exists exactly when the payment commits (a rollback takes it
    along). Once the transaction commits, the relay publishes it at once (the
    fast path; ``robust``: a broker that refuses it is logged and never turns a
    committed payment into an error answer); whatever that misses, the beat task
    ``orders.relay_outbox`` publishes later (:mod:`orders.outbox`). Returns the
    message id.
    """
    message_id = order_paid_message_id(order_id=order_id)
    message = outbox_enqueue(
        message_id=message_id, event=ORDER_PAID, payload={"order_id": order_id}
    )
    message_ids = [message.pk]

    # a function, not a functools.partial: when a robust hook raises, Django logs it by
    # its __qualname__, which a partial lacks, and that AttributeError escaped as a 500
    # after the payment had committed (seen in the soak, the relay's connection ended by
    # pg_terminate_backend)
    def relay() -> None:
        outbox_relay(batch_size=1, message_ids=message_ids)

    transaction.on_commit(relay, robust=True)
    return message_id


def receipt_issue(*, order: Order) -> tuple[Receipt, bool]:
    """The receipt of a paid order, created once (``order`` is unique); and whether now."""
    if order.paid_at is None:
        raise ValueError(f"order {order.pk} is not paid")
    with transaction.atomic():
        receipt, created = Receipt.objects.get_or_create(
            order=order, defaults={"amount": order.amount, "paid_at": order.paid_at}
        )
    return receipt, created


def daily_sales_increment(*, day: datetime.date, amount: Decimal) -> DailySales:
    """Count one sale of ``amount`` on ``day``: ``orders + 1``, ``total + amount``.

    **Not idempotent**: every call counts once more. Callers must make sure each
    sale is counted once (the ``order.paid`` consumer does, by message id).
    """
    amount = require_amount(amount)
    with transaction.atomic():
        DailySales.objects.get_or_create(date=day)
        DailySales.objects.filter(date=day).update(
            orders=F("orders") + 1, total=F("total") + amount, updated_at=timezone.now()
        )
        return DailySales.objects.get(date=day)


def order_paid_record(*, order_id: int) -> tuple[Receipt, DailySales] | None:
    """The effects of ``order.paid``: the receipt, and the sale counted on its day (UTC).

    ``None`` (nothing done) for an order that does not exist or was never paid.
    Counts the sale on every call: run it once per message.
    """
    with transaction.atomic():
        order = order_get_by_id(order_id=order_id)
        if order is None or order.paid_at is None:
            return None
        receipt, _created = receipt_issue(order=order)
        day = order.paid_at.astimezone(datetime.UTC).date()
        sales = daily_sales_increment(day=day, amount=order.amount)
    return receipt, sales
