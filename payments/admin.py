"""Admin of the payments app: payment records are a read-only audit trail."""

from __future__ import annotations

from django.contrib import admin

from accounts.admin_base import ReadOnlyModelAdmin
from payments.models import GatewayPayment, PaymentRecord


@admin.register(PaymentRecord)
class PaymentRecordAdmin(ReadOnlyModelAdmin):
    list_display = ("pay_no", "order", "user", "amount", "status", "ledger_reference", "created_at")
    list_filter = ("status", "created_at")
    list_select_related = ("order", "user")
    search_fields = ("pay_no", "ledger_reference", "user__username", "order__request_id")
    date_hierarchy = "created_at"
    ordering = ("-id",)


@admin.register(GatewayPayment)
class GatewayPaymentAdmin(ReadOnlyModelAdmin):
    """The gateway's notifications, one per trade: a read-only audit trail."""

    list_display = ("trade_no", "order", "amount", "status", "created_at")
    list_filter = ("status", "created_at")
    list_select_related = ("order",)
    search_fields = ("trade_no", "order__request_id")
    date_hierarchy = "created_at"
    ordering = ("-id",)
