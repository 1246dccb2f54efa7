"""Domain errors of the payments app (no HTTP here; the API maps them in ``apis.py``)."""

from __future__ import annotations


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
