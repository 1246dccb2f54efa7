"""What the payments app does when an order it paid changes (connected in ``apps.py``)."""

from __future__ import annotations

from typing import Any

from orders.models import Order
from payments.services import payment_refund


def refund_cancelled_order(sender: type[Order], *, order: Order, **kwargs: Any) -> None:
    """A paid order was cancelled: credit its balance payment back, in that transaction.

    Raises :class:`~payments.errors.OrderNotRefundable` (a ``CancelRefused``) for an
    order paid through the gateway, which rolls the cancel back.
    """
    payment_refund(order=order)
