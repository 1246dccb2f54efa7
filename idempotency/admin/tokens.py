"""The admin of one-time submit tokens: read-only (only their hashes are stored)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.http import HttpRequest

from idempotency.models import SubmitToken

if TYPE_CHECKING:
    _TokenAdmin = admin.ModelAdmin[SubmitToken]
else:
    _TokenAdmin = admin.ModelAdmin


@admin.register(SubmitToken)
class SubmitTokenAdmin(_TokenAdmin):
    """Read-only view of one-time submit tokens (only their hashes are stored)."""

    list_display = ("purpose", "scope", "created_at", "expires_at", "consumed_at")
    list_filter = ("purpose",)
    search_fields = ("=scope", "purpose")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    readonly_fields = ("token_hash", "scope", "purpose", "created_at", "expires_at", "consumed_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: SubmitToken | None = None) -> bool:
        return False
