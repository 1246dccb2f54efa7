"""URLs of the orders API (mounted at ``api/orders/``).

Paying an order is the payments app's business (payments build on orders, never the
reverse): ``POST /api/orders/{id}/pay/`` is routed by ``payments.order_urls``.
"""

from __future__ import annotations

from django.urls import path, register_converter

from orders.apis import (
    OrderCancelApi,
    OrderCheckoutApi,
    OrderCompleteApi,
    OrderDetailApi,
    OrderListCreateApi,
    OrderShipApi,
)


class OrderIdConverter:
    """A positive 64-bit id; anything larger names no order (404, not a database overflow)."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if not 0 < number < 2**63:
            raise ValueError(value)
        return number

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(OrderIdConverter, "order_id")

app_name = "orders"

urlpatterns = [
    path("", OrderListCreateApi.as_view(), name="list"),
    path("checkout/", OrderCheckoutApi.as_view(), name="checkout"),
    path("<order_id:pk>/", OrderDetailApi.as_view(), name="detail"),
    path("<order_id:pk>/cancel/", OrderCancelApi.as_view(), name="cancel"),
    path("<order_id:pk>/ship/", OrderShipApi.as_view(), name="ship"),
    path("<order_id:pk>/complete/", OrderCompleteApi.as_view(), name="complete"),
]
