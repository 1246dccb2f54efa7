"""Side effects the tests count: one row per executed view body."""

from __future__ import annotations

from django.db import models


class Effect(models.Model):
    label = models.CharField(max_length=255)
    amount = models.IntegerField(default=0)

    def __str__(self) -> str:
        return self.label


class Wallet(models.Model):
    balance = models.IntegerField(default=0)

    def __str__(self) -> str:
        return str(self.balance)
