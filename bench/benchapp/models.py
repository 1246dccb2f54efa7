"""The side effects every benchmarked write has: one Entry row and a balance change."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Account(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True
    )
    balance = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.user_id}: {self.balance}"


class Entry(models.Model):
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="entries")
    amount = models.IntegerField()
    memo = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.account_id}: {self.amount}"
