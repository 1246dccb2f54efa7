"""Admin of the orders app.

Statuses move only through :func:`orders.services.order_transition` (the
status table), so the admin shows orders read-only and offers the moves as
bulk actions.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from accounts.admin_base import ReadOnlyModelAdmin
from orders.errors import CancelRefused, IllegalTransition
from orders.models import DailySales, Order, OrderStatus, OutboxMessage, Receipt
from orders.services import order_cancel, order_transition


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("id", "request_id", "user", "amount", "status", "created_at", "paid_at")
    list_filter = ("status", "created_at", "paid_at")
    list_select_related = ("user",)
    search_fields = ("request_id", "user__username")
    date_hierarchy = "created_at"
    ordering = ("-id",)
    readonly_fields = (
        "request_id",
        "user",
        "amount",
        "status",
        "created_at",
        "updated_at",
        "paid_at",
    )
    actions = ("cancel_orders", "ship_orders", "complete_orders")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def _move(self, request: HttpRequest, queryset: QuerySet[Order], to: str) -> None:
        moved = refused = 0
        for order_id in queryset.values_list("pk", flat=True):
            try:
                if to == OrderStatus.CANCELLED:
                    order_cancel(order_id=order_id)  # a PAID order is refunded
                else:
                    order_transition(order_id=order_id, to=to)
            except (IllegalTransition, CancelRefused):
                refused += 1
            else:
                moved += 1
        self.message_user(
            request, _("%(moved)d order(s) moved to %(to)s.") % {"moved": moved, "to": to}
        )
        if refused:
            self.message_user(
                request,
                _("%(refused)d order(s) cannot move to %(to)s.") % {"refused": refused, "to": to},
                level=messages.WARNING,
            )

    @admin.action(description=_("Cancel selected orders"))
    def cancel_orders(self, request: HttpRequest, queryset: QuerySet[Order]) -> None:
        self._move(request, queryset, OrderStatus.CANCELLED)

    @admin.action(description=_("Mark selected orders shipped"))
    def ship_orders(self, request: HttpRequest, queryset: QuerySet[Order]) -> None:
        self._move(request, queryset, OrderStatus.SHIPPED)

    @admin.action(description=_("Mark selected orders completed"))
    def complete_orders(self, request: HttpRequest, queryset: QuerySet[Order]) -> None:
        self._move(request, queryset, OrderStatus.COMPLETED)


@admin.register(Receipt)
class ReceiptAdmin(ReadOnlyModelAdmin):
    """Receipts are written by the ``order.paid`` consumer: read-only."""

    list_display = ("id", "order", "amount", "paid_at", "issued_at")
    list_select_related = ("order",)
    search_fields = ("order__request_id",)
    date_hierarchy = "issued_at"
    ordering = ("-id",)


@admin.register(DailySales)
class DailySalesAdmin(ReadOnlyModelAdmin):
    """Sales counters, kept by the ``order.paid`` consumer: read-only."""

    list_display = ("date", "orders", "total", "updated_at")
    date_hierarchy = "date"
    ordering = ("-date",)


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyModelAdmin):
    """The transactional outbox: what was announced, and whether the relay has sent it."""

    list_display = ("id", "event", "message_id", "created_at", "sent_at", "attempts")
    list_filter = ("event", ("sent_at", admin.EmptyFieldListFilter))
    search_fields = ("message_id",)
    date_hierarchy = "created_at"
    ordering = ("-id",)
