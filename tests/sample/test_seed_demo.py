"""``manage.py seed_demo``: demo data, and a second run that changes nothing."""

from __future__ import annotations

from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from accounts.models import Account, LedgerEntry

pytestmark = pytest.mark.django_db


def seed() -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def snapshot() -> dict[str, Any]:
    User = get_user_model()
    return {
        "users": sorted(User.objects.values_list("username", "password", "is_staff")),
        "tokens": sorted(Token.objects.values_list("user__username", "key")),
        "accounts": sorted(
            Account.objects.values_list("user__username", "balance", "version", "updated_at")
        ),
        "ledger": sorted(LedgerEntry.objects.values_list("pk", "reference", "amount")),
    }


def test_seed_creates_the_demo_data() -> None:
    output = seed()
    User = get_user_model()
    alice, bob, admin = (User.objects.get(username=n) for n in ("alice", "bob", "admin"))
    assert alice.check_password("demo-password")
    assert bob.check_password("demo-password")
    assert admin.check_password("demo-password")
    assert admin.is_staff and admin.is_superuser
    assert not alice.is_staff
    assert Account.objects.get(user=alice).balance == Decimal("1000.00")
    assert Account.objects.get(user=bob).balance == Decimal("500.00")
    assert set(LedgerEntry.objects.values_list("reference", flat=True)) == {
        "seed_alice_initial",
        "seed_bob_initial",
    }
    lines = output.strip().splitlines()
    assert lines[0].startswith("seed_demo: 3 user(s) created")
    for user in (alice, bob):
        assert f"token {user.username}: {Token.objects.get(user=user).key}" in lines


def test_tokens_are_random_not_fixed() -> None:
    seed()
    keys = set(Token.objects.values_list("key", flat=True))
    assert len(keys) == 2
    assert all(len(key) == 40 for key in keys)


def test_second_run_changes_nothing() -> None:
    seed()
    before = snapshot()
    output = seed()
    assert snapshot() == before
    assert output.startswith("seed_demo: 0 user(s) created")


def test_help_says_demo_only() -> None:
    from accounts.management.commands.seed_demo import Command

    assert "DEMO ONLY" in Command.help
