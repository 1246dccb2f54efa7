"""``manage.py seed_demo``: demo users, tokens and funded accounts; safe to run again."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from rest_framework.authtoken.models import Token

from accounts.services import account_deposit, account_get_or_create_for_user

#: DEMO ONLY: a well-known password, never to be used outside a local sandbox.
DEMO_PASSWORD = "demo-password"

#: username -> (initial deposit, its fixed ledger reference)
DEMO_USERS: dict[str, tuple[Decimal, str]] = {
    "alice": (Decimal("1000.00"), "seed_alice_initial"),
    "bob": (Decimal("500.00"), "seed_bob_initial"),
}
ADMIN_USERNAME = "admin"


class Command(BaseCommand):
    help = (
        "Create the demo users alice and bob (with API tokens and funded accounts: "
        "1000.00 and 500.00) and a staff superuser 'admin'. DEMO ONLY: every one of "
        f"them gets the well-known password '{DEMO_PASSWORD}'; never run this against a "
        "real deployment. Idempotent: existing users keep their password and token, "
        "and the deposits use fixed references, so a second run changes nothing."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        created_users = 0
        tokens: dict[str, str] = {}
        with transaction.atomic():
            for username, (amount, reference) in DEMO_USERS.items():
                user, created = User.objects.get_or_create(username=username)
                if created:
                    user.set_password(DEMO_PASSWORD)
                    user.save(update_fields=["password"])
                    created_users += 1
                token, _ = Token.objects.get_or_create(user=user)
                tokens[username] = token.key
                account = account_get_or_create_for_user(user=user)
                account_deposit(account_id=account.pk, amount=amount, reference=reference)
            if not User.objects.filter(username=ADMIN_USERNAME).exists():
                User.objects.create_superuser(ADMIN_USERNAME, "", DEMO_PASSWORD)
                created_users += 1
        balances = ", ".join(
            f"{name} {account_get_or_create_for_user(user=User.objects.get(username=name)).balance}"
            for name in DEMO_USERS
        )
        self.stdout.write(
            f"seed_demo: {created_users} user(s) created; balances {balances}; "
            f"password '{DEMO_PASSWORD}' (demo only)"
        )
        for username, key in tokens.items():
            self.stdout.write(f"token {username}: {key}")
