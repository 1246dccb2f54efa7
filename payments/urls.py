"""URLs of the payments API (mounted at ``api/payments/``).

Paying itself is ``POST /api/orders/{id}/pay/``, routed in ``orders.urls``.
"""

from __future__ import annotations

from django.urls import path

from payments.apis import PaymentDetailApi, PaymentListApi

app_name = "payments"

urlpatterns = [
    path("", PaymentListApi.as_view(), name="list"),
    path("<str:pay_no>/", PaymentDetailApi.as_view(), name="detail"),
]
