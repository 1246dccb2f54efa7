"""App configuration of the sample payments app."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PaymentsConfig(AppConfig):
    name = "payments"
    verbose_name = _("Payments")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from orders.signals import order_paid_cancelled
        from payments.receivers import refund_cancelled_order

        order_paid_cancelled.connect(
            refund_cancelled_order, dispatch_uid="payments.refund_cancelled_order"
        )
