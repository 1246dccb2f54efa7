"""Reads of the orders app; every read is limited to one user's orders."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orders.models import Order

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.db.models import QuerySet


def order_list(*, user: User) -> QuerySet[Order]:
    return Order.objects.filter(user=user).order_by("-id")


def order_get(*, user: User, order_id: int) -> Order | None:
    return order_list(user=user).filter(pk=order_id).first()


def order_get_by_id(*, order_id: int) -> Order | None:
    """Any user's order: only for trusted callers (the payment gateway, message consumers)."""
    return Order.objects.filter(pk=order_id).first()
