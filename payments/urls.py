"""URLs of the payments API (mounted at ``api/payments/``).

Paying itself is ``POST /api/orders/{id}/pay/``, routed in ``orders.urls``. The
gateway's callback comes before the payment detail route, so ``callback`` is never
read as a pay number.
"""

from __future__ import annotations

from django.urls import path

from payments.apis import GatewayCallbackApi, PaymentDetailApi, PaymentListApi

app_name = "payments"

urlpatterns = [
    path("", PaymentListApi.as_view(), name="list"),
    path("callback/", GatewayCallbackApi.as_view(), name="callback"),
    path("<str:pay_no>/", PaymentDetailApi.as_view(), name="detail"),
]
