"""Admin of the payments app: payment records are a read-only audit trail."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from payments.models import GatewayPayment, PaymentRecord


@admin.register(PaymentRecord)
class PaymentRecordAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("pay_no", "order", "user", "amount", "status", "ledger_reference", "created_at")
    list_filter = ("status", "created_at")
    list_select_related = ("order", "user")
    search_fields = ("pay_no", "ledger_reference", "user__username", "order__request_id")
    date_hierarchy = "created_at"
    ordering = ("-id",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(GatewayPayment)
class GatewayPaymentAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The gateway's notifications, one per trade: a read-only audit trail."""

    list_display = ("trade_no", "order", "amount", "status", "created_at")
    list_filter = ("status", "created_at")
    list_select_related = ("order",)
    search_fields = ("trade_no", "order__request_id")
    date_hierarchy = "created_at"
    ordering = ("-id",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
