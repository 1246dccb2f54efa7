"""Domain errors of the payments app (no HTTP here; the API maps them in ``apis.py``)."""

from __future__ import annotations

from decimal import Decimal

from orders.errors import CancelRefused


class PaymentError(Exception):
    """Base class of every payments error."""


class InvalidPayNo(PaymentError, ValueError):
    def __init__(self, pay_no: str) -> None:
        super().__init__(
            f"Pay number {pay_no!r} is not 1-60 characters of letters, digits and '_.:-'."
        )
        self.pay_no = pay_no


class PaymentConflict(PaymentError):
    """The pay number already paid a different order (or belongs to another user)."""

    def __init__(self, pay_no: str) -> None:
        super().__init__(
            f"Pay number {pay_no!r} was already used for a different payment; "
            "use a new pay number for a new payment."
        )
        self.pay_no = pay_no


class OrderNotPayable(PaymentError):
    def __init__(self, order_id: int, status: str) -> None:
        super().__init__(f"Order {order_id} is {status}; only CREATED orders can be paid.")
        self.order_id = order_id
        self.status = status


class InvalidTradeNo(PaymentError, ValueError):
    def __init__(self, trade_no: str) -> None:
        super().__init__(
            f"Trade number {trade_no!r} is not 1-64 characters of letters, digits and '_.:-'."
        )
        self.trade_no = trade_no


class CallbackAmountMismatch(PaymentError):
    """The gateway reports an amount that is not the order's: nothing is recorded."""

    def __init__(self, trade_no: str, order_id: int, expected: Decimal, received: Decimal) -> None:
        super().__init__(
            f"Trade {trade_no!r} reports {received} for order {order_id}, "
            f"whose amount is {expected}; the notification was not applied."
        )
        self.trade_no = trade_no
        self.order_id = order_id
        self.expected = expected
        self.received = received


class TradeNoConflict(PaymentError):
    """The trade number was already notified with another order, amount or status."""

    def __init__(self, trade_no: str) -> None:
        super().__init__(
            f"Trade {trade_no!r} was already notified with a different order, amount or "
            "status; a trade is notified with the same content every time."
        )
        self.trade_no = trade_no


class OrderNotRefundable(PaymentError, CancelRefused):
    """A PAID order without a balance payment: it was paid through the gateway."""

    def __init__(self, order_id: int) -> None:
        super().__init__(
            f"Order {order_id} was paid through the payment gateway; "
            "refund it through the gateway, not by cancelling it here."
        )
        self.order_id = order_id


class PaymentAlreadyRefunded(PaymentError, CancelRefused):
    def __init__(self, pay_no: str) -> None:
        super().__init__(f"Payment {pay_no!r} was already refunded.")
        self.pay_no = pay_no
