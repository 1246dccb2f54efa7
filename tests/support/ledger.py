"""What the sample's ledger shows of a customer."""

from __future__ import annotations

from django.contrib.auth.models import User

from accounts.models import LedgerEntry, LedgerEntryKind


def charges(user: User) -> int:
    """How many times ``user``'s account was charged (its deduction entries)."""
    return LedgerEntry.objects.filter(account__user=user, kind=LedgerEntryKind.DEDUCTION).count()
