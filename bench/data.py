"""The benchmark's data in PostgreSQL: Django set up, fresh users with tokens and accounts,
and the effects the view bodies have had."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def setup_django() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()


@dataclass
class Users:
    token: str  # the caller of every load phase
    other_token: str  # another user: must never see the first one's responses
    revoked_user: User


def reset_data() -> Users:
    """Empty tables, fresh users with tokens and accounts at balance 0."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from rest_framework.authtoken.models import Token

    from bench.benchapp.models import Account

    tables = [
        "benchapp_entry",
        "idempotency_idempotencyrecord",
        "drf_idempotency_idempotencyrecord",
    ]
    existing = set(connection.introspection.table_names())
    with connection.cursor() as cursor:
        for table in tables:
            if table in existing:
                cursor.execute(f"TRUNCATE {table}")
    user_model = get_user_model()
    tokens = []
    for name in ("bench", "bench-other", "bench-revoked"):
        user, _ = user_model.objects.get_or_create(username=name)
        Account.objects.update_or_create(user=user, defaults={"balance": 0})
        Token.objects.filter(user=user).delete()
        tokens.append(Token.objects.create(user=user))
    return Users(tokens[0].key, tokens[1].key, tokens[2].user)


def effects() -> tuple[int, int]:
    """(entries, balance) of the load user: what the view bodies have done so far."""
    from bench.benchapp.models import Account, Entry

    account = Account.objects.get(user__username="bench")
    return Entry.objects.filter(account=account).count(), int(account.balance)
