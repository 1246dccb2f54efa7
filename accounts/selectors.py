"""Reads of the accounts app."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accounts.models import Account, LedgerEntry

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.db.models import QuerySet


def account_get_for_user(*, user: User) -> Account | None:
    return Account.objects.select_related("user").filter(user=user).first()


def ledger_entry_list(*, account_id: int) -> QuerySet[LedgerEntry]:
    return LedgerEntry.objects.filter(account_id=account_id).order_by("-id")


def ledger_entry_get(*, account_id: int, reference: str) -> LedgerEntry | None:
    return LedgerEntry.objects.filter(account_id=account_id, reference=reference).first()
