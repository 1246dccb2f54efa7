"""Fixtures of the payments app's tests: the gateway and an order it pays."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from orders.models import Order
from tests.support.factories import OrderFactory, funded_account


@pytest.fixture
def gateway() -> APIClient:
    """The gateway: no user, server errors answered as 500 instead of raised."""
    return APIClient(raise_request_exception=False)


@pytest.fixture
def order(user: User) -> Order:
    funded_account("100.00", user=user)
    return OrderFactory(user=user, amount=Decimal("25.00"))
