"""Reads of the payments app; every read is limited to one user's payments."""

from __future__ import annotations

from typing import TYPE_CHECKING

from payments.models import PaymentRecord

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.db.models import QuerySet


def payment_list(*, user: User) -> QuerySet[PaymentRecord]:
    return PaymentRecord.objects.filter(user=user).order_by("-id")


def payment_get(*, user: User, pay_no: str) -> PaymentRecord | None:
    return payment_list(user=user).filter(pay_no=pay_no).first()
