"""``POST /api/orders/{id}/pay/``: paying, under the orders' URL (mounted at ``api/orders/``).

Routed here rather than in ``orders.urls``: payments build on orders, orders never import
payments.
"""

from __future__ import annotations

from django.urls import path

from orders.urls import OrderIdConverter  # noqa: F401  (registers the order_id converter)
from payments.apis import OrderPayApi

app_name = "order_payments"

urlpatterns = [
    path("<order_id:pk>/pay/", OrderPayApi.as_view(), name="pay"),
]
