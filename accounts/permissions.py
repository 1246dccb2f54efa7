"""Roles of the sample: customers own their orders; merchants (staff) fulfil them."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

#: Members of this group may ship and complete orders without being staff.
MERCHANT_GROUP = "merchant"


def is_merchant(user: Any) -> bool:
    """Staff, or a member of the :data:`MERCHANT_GROUP` group."""
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_staff or user.groups.filter(name=MERCHANT_GROUP).exists())


class IsMerchant(BasePermission):
    """Lets through staff and merchants; a customer gets ``403 permission-denied``."""

    message = "Only staff or merchants may do this."

    def has_permission(self, request: Request, view: Any) -> bool:
        return is_merchant(request.user)
