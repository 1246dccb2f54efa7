"""Reads of the accounts app."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from django.db.models import DecimalField, Sum, Value
from django.db.models.functions import Coalesce

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


def account_ledger_totals() -> QuerySet[Account, tuple[int, Decimal, Decimal]]:
    """``(account id, balance, sum of its ledger amounts)`` of every account, by id.

    One statement, so each row's balance and ledger total come from one snapshot
    even while payments go on. On SQLite the total is summed in floating point:
    round it to cents before comparing.
    """
    total = Coalesce(
        Sum("ledger_entries__amount"),
        Value(Decimal("0.00")),
        output_field=DecimalField(max_digits=20, decimal_places=2),
    )
    return (
        Account.objects.annotate(ledger_total=total)
        .order_by("pk")
        .values_list("pk", "balance", "ledger_total")
    )
