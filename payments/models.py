"""Payments: one record per client ``pay_no``, written in the same transaction as its effects."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class PaymentStatus(models.TextChoices):
    SUCCEEDED = "SUCCEEDED", _("Succeeded")
    REFUNDED = "REFUNDED", _("Refunded")


class PaymentRecord(models.Model):
    pay_no = models.CharField(
        _("pay number"),
        max_length=64,
        help_text=_(
            "Chosen by the client, unique per user; a repeat with the same number returns "
            "this payment."
        ),
    )
    order = models.ForeignKey(
        "orders.Order",
        on_delete=models.PROTECT,
        related_name="payments",
        verbose_name=_("order"),
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="payments",
        verbose_name=_("user"),
    )
    amount = models.DecimalField(_("amount"), max_digits=12, decimal_places=2)
    status = models.CharField(
        _("status"),
        max_length=16,
        choices=PaymentStatus.choices,
        default=PaymentStatus.SUCCEEDED,
    )
    ledger_reference = models.CharField(
        _("ledger reference"),
        max_length=64,
        help_text=_("Reference of the deduction in the payer's account ledger."),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = _("payment record")
        verbose_name_plural = _("payment records")
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "pay_no"],
                name="payments_paymentrecord_unique_pay_no_per_user",
            ),
        ]

    def __str__(self) -> str:
        return f"Payment {self.pay_no}: {self.amount} for order {self.order_id}"


class GatewayPaymentStatus(models.TextChoices):
    SUCCESS = "SUCCESS", _("Success")
    FAILED = "FAILED", _("Failed")


class GatewayPayment(models.Model):
    """One notification of the payment gateway, recorded once per ``trade_no``.

    ``trade_no`` is unique: the last line of defence when a notification gets past
    the callback's idempotency key (after its TTL, or with a store that lost it).
    At most one SUCCESS per order: two trades can never both pay one order.
    """

    trade_no = models.CharField(
        _("trade number"),
        max_length=64,
        unique=True,
        help_text=_("The gateway's id of the trade; the gateway notifies each one once or more."),
    )
    order = models.ForeignKey(
        "orders.Order",
        on_delete=models.PROTECT,
        related_name="gateway_payments",
        verbose_name=_("order"),
    )
    amount = models.DecimalField(_("amount"), max_digits=12, decimal_places=2)
    status = models.CharField(_("status"), max_length=16, choices=GatewayPaymentStatus.choices)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = _("gateway payment")
        verbose_name_plural = _("gateway payments")
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["order"],
                condition=models.Q(status="SUCCESS"),
                name="payments_gatewaypayment_one_success_per_order",
            ),
        ]

    def __str__(self) -> str:
        return f"Trade {self.trade_no}: {self.status} {self.amount} for order {self.order_id}"
