"""Accounts: a balance guarded by a version number, and an append-only ledger."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class Account(models.Model):
    """One account per user.

    ``version`` grows by exactly one with every balance change; writers update
    the row only where the version is still the one they read (optimistic
    concurrency), so no change is ever lost.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="account",
        verbose_name=_("user"),
    )
    balance = models.DecimalField(
        _("balance"), max_digits=12, decimal_places=2, default=Decimal("0.00")
    )
    version = models.PositiveBigIntegerField(_("version"), default=0)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("account")
        verbose_name_plural = _("accounts")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(balance__gte=0),
                name="accounts_account_balance_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"Account of user {self.user_id}: {self.balance}"


class LedgerEntryKind(models.TextChoices):
    DEPOSIT = "deposit", _("Deposit")
    DEDUCTION = "deduction", _("Deduction")
    REFUND = "refund", _("Refund")


class LedgerEntry(models.Model):
    """One balance change. ``(account, reference)`` is unique: a change happens once."""

    account = models.ForeignKey(
        Account,
        on_delete=models.PROTECT,
        related_name="ledger_entries",
        verbose_name=_("account"),
    )
    amount = models.DecimalField(
        _("amount"),
        max_digits=12,
        decimal_places=2,
        help_text=_("Signed: negative for deductions, positive for deposits and refunds."),
    )
    balance_after = models.DecimalField(_("balance after"), max_digits=12, decimal_places=2)
    reference = models.CharField(_("reference"), max_length=64)
    kind = models.CharField(_("kind"), max_length=16, choices=LedgerEntryKind.choices)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("ledger entry")
        verbose_name_plural = _("ledger entries")
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["account", "reference"],
                name="accounts_ledgerentry_unique_reference",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.amount} ({self.reference})"


class ReconciliationRun(models.Model):
    """One run of the ledger reconciliation: every account's balance against its ledger.

    An account is a *mismatch* when the sum of its ledger amounts differs from its
    balance. ``details`` keeps the first mismatches found (account, balance, ledger
    total); ``mismatches`` counts all of them.
    """

    started_at = models.DateTimeField(_("started at"), db_index=True)
    finished_at = models.DateTimeField(_("finished at"))
    accounts_checked = models.PositiveIntegerField(_("accounts checked"), default=0)
    mismatches = models.PositiveIntegerField(_("mismatches"), default=0)
    details = models.JSONField(_("details"), default=list, blank=True)

    class Meta:
        verbose_name = _("reconciliation run")
        verbose_name_plural = _("reconciliation runs")
        ordering = ["-id"]

    def __str__(self) -> str:
        return (
            f"Reconciliation at {self.started_at:%Y-%m-%d %H:%M:%S}: "
            f"{self.mismatches} mismatch(es) in {self.accounts_checked} account(s)"
        )
