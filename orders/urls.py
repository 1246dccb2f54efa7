"""URLs of the orders API (mounted at ``api/orders/``).

Paying an order is the payments app's business; its view is routed here so the
URL reads ``/api/orders/{id}/pay/``.
"""

from __future__ import annotations

from django.urls import path

from orders.apis import (
    OrderCancelApi,
    OrderCompleteApi,
    OrderDetailApi,
    OrderListCreateApi,
    OrderShipApi,
)
from payments.apis import OrderPayApi

app_name = "orders"

urlpatterns = [
    path("", OrderListCreateApi.as_view(), name="list"),
    path("<int:pk>/", OrderDetailApi.as_view(), name="detail"),
    path("<int:pk>/cancel/", OrderCancelApi.as_view(), name="cancel"),
    path("<int:pk>/ship/", OrderShipApi.as_view(), name="ship"),
    path("<int:pk>/complete/", OrderCompleteApi.as_view(), name="complete"),
    path("<int:pk>/pay/", OrderPayApi.as_view(), name="pay"),
]
