"""Writes of the orders app.

* Creating is idempotent per client ``request_id``: look up, else insert in a
  savepoint and, when a concurrent request won the unique index, return its
  order. A repeat gets the same order; a request id reused for another user or
  amount is a :class:`OrderRequestConflict`, never a silent success.
* Moving an order is one conditional ``UPDATE ... WHERE id = ? AND status IN
  (<allowed sources>)`` judged by its row count. Zero rows means the order was
  not in a source status: when it already is in the target the move was done
  before and the repeat answers like the first; otherwise it is an
  :class:`IllegalTransition`.
"""

from __future__ import annotations

from collections.abc import Collection
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.money import identifier_pattern, require_amount
from orders.errors import IllegalTransition, InvalidRequestId, OrderNotFound, OrderRequestConflict
from orders.models import Order, OrderStatus, transition_sources

if TYPE_CHECKING:
    from django.contrib.auth.models import User

REQUEST_ID_PATTERN = identifier_pattern(64)


def order_create(*, user: User, request_id: str, amount: Decimal) -> tuple[Order, bool]:
    """The order named by ``request_id`` and whether this call created it."""
    if not isinstance(request_id, str) or not REQUEST_ID_PATTERN.fullmatch(request_id):
        raise InvalidRequestId(str(request_id))
    amount = require_amount(amount)
    with transaction.atomic():
        existing = _order_by_request_id(request_id)
        if existing is None:
            try:
                with transaction.atomic():
                    order = Order.objects.create(request_id=request_id, user=user, amount=amount)
            except IntegrityError:
                # A concurrent request inserted this request id first.
                existing = _order_by_request_id(request_id)
                if existing is None:
                    raise
            else:
                # Read back what the database holds, so the first answer is
                # exactly what every repeat will be answered with.
                order.refresh_from_db()
                return order, True
        if existing.user_id != user.pk or existing.amount != amount:
            raise OrderRequestConflict(request_id)
        return existing, False


def _order_by_request_id(request_id: str) -> Order | None:
    return Order.objects.filter(request_id=request_id).first()


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
    return order_transition(order_id=order_id, to=OrderStatus.CANCELLED)


def order_ship(*, order_id: int) -> Order:
    return order_transition(order_id=order_id, to=OrderStatus.SHIPPED)


def order_complete(*, order_id: int) -> Order:
    return order_transition(order_id=order_id, to=OrderStatus.COMPLETED)
