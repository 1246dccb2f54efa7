"""Payments: one record per client ``pay_no``, written in the same transaction as its effects."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class PaymentStatus(models.TextChoices):
    SUCCEEDED = "SUCCEEDED", _("Succeeded")


class PaymentRecord(models.Model):
    pay_no = models.CharField(
        _("pay number"),
        max_length=64,
        unique=True,
        help_text=_("Chosen by the client; a repeat with the same number returns this payment."),
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

    def __str__(self) -> str:
        return f"Payment {self.pay_no}: {self.amount} for order {self.order_id}"
