"""Admin of the accounts app.

Balances change only through the services (version check and ledger), so the
admin shows them read-only; the ledger is an audit trail with no add, change
or delete.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from accounts.admin_base import ReadOnlyModelAdmin
from accounts.models import Account, LedgerEntry, ReconciliationRun


class LedgerEntryInline(admin.TabularInline):  # type: ignore[type-arg]
    model = LedgerEntry
    fields = ("created_at", "kind", "amount", "balance_after", "reference")
    readonly_fields = fields
    ordering = ("-id",)
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("id", "user", "balance", "version", "updated_at")
    list_select_related = ("user",)
    search_fields = ("user__username", "user__email")
    date_hierarchy = "created_at"
    ordering = ("-id",)
    raw_id_fields = ("user",)
    readonly_fields = ("balance", "version", "created_at", "updated_at")
    inlines = (LedgerEntryInline,)

    def get_readonly_fields(self, request: HttpRequest, obj: Account | None = None) -> Any:
        if obj is not None:
            return ("user", *self.readonly_fields)
        return self.readonly_fields


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyModelAdmin):
    list_display = ("id", "account", "kind", "amount", "balance_after", "reference", "created_at")
    list_filter = ("kind", "created_at")
    list_select_related = ("account__user",)
    search_fields = ("reference", "account__user__username")
    date_hierarchy = "created_at"
    ordering = ("-id",)


@admin.register(ReconciliationRun)
class ReconciliationRunAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Runs of the scheduled reconciliation: a read-only audit trail."""

    list_display = ("id", "started_at", "finished_at", "accounts_checked", "mismatches")
    list_filter = ("started_at",)
    date_hierarchy = "started_at"
    ordering = ("-id",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
