"""Domain errors of the orders app (no HTTP here; the API maps them in ``apis.py``)."""

from __future__ import annotations


class OrderError(Exception):
    """Base class of every orders error."""


class OrderNotFound(OrderError, LookupError):
    def __init__(self, order_id: int) -> None:
        super().__init__(f"Order {order_id} does not exist.")
        self.order_id = order_id


class InvalidRequestId(OrderError, ValueError):
    def __init__(self, request_id: str) -> None:
        super().__init__(
            f"Request id {request_id!r} is not 1-64 characters of letters, digits and '_.:-'."
        )
        self.request_id = request_id


class OrderRequestConflict(OrderError):
    """The request id already names an order of another user or amount."""

    def __init__(self, request_id: str) -> None:
        super().__init__(
            f"Request id {request_id!r} already names a different order; "
            "use a new request id for a new order."
        )
        self.request_id = request_id


class CancelRefused(OrderError):
    """A receiver of :data:`orders.signals.order_paid_cancelled` refused the cancel of a
    paid order (the money cannot be given back here); the cancel was rolled back."""


class IllegalTransition(OrderError):
    def __init__(self, order_id: int, current: str, to: str) -> None:
        super().__init__(f"Order {order_id} is {current} and cannot become {to}.")
        self.order_id = order_id
        self.current = current
        self.to = to
