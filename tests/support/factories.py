"""factory-boy factories of the sample project's models."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import factory
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from accounts.models import Account
from orders.models import Order, OrderStatus


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.com")
    password = factory.django.Password("test-password")


class TokenFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Token

    user = factory.SubFactory(UserFactory)


class AccountFactory(factory.django.DjangoModelFactory):
    """An account; its balance is set directly (version 0), use the services to fund it."""

    class Meta:
        model = Account

    user = factory.SubFactory(UserFactory)
    balance = Decimal("0.00")
    version = 0


class OrderFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Order

    request_id = factory.Sequence(lambda n: f"req-{n}")
    user = factory.SubFactory(UserFactory)
    amount = Decimal("10.00")
    status = OrderStatus.CREATED


def funded_account(balance: Decimal | str, **kwargs: Any) -> Account:
    """An account funded through :func:`account_deposit` (version 1, one ledger entry)."""
    from accounts.services import account_deposit

    account: Account = AccountFactory(**kwargs)
    account_deposit(account_id=account.pk, amount=Decimal(balance), reference="initial")
    account.refresh_from_db()
    return account
