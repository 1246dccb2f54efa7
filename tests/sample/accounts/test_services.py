"""Services of the accounts app: deposits and deductions happen once per reference."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from accounts import services
from accounts.errors import (
    AccountConflict,
    AccountNotFound,
    BalanceLimitExceeded,
    InsufficientFunds,
    InvalidReference,
    LedgerReferenceConflict,
)
from accounts.models import Account, LedgerEntry, LedgerEntryKind
from accounts.money import MAX_AMOUNT, InvalidAmount
from accounts.services import account_deduct, account_deposit, account_get_or_create_for_user
from tests.support.factories import AccountFactory, UserFactory, funded_account

pytestmark = pytest.mark.django_db


def test_get_or_create_for_user_opens_an_empty_account_once() -> None:
    user = UserFactory()
    first = account_get_or_create_for_user(user=user)
    second = account_get_or_create_for_user(user=user)
    assert first.pk == second.pk
    assert first.balance == Decimal("0.00")
    assert first.version == 0
    assert Account.objects.filter(user=user).count() == 1


def test_deposit_adds_to_the_balance_and_writes_the_ledger() -> None:
    account = AccountFactory()
    entry = account_deposit(account_id=account.pk, amount=Decimal("25.50"), reference="dep-1")
    account.refresh_from_db()
    assert account.balance == Decimal("25.50")
    assert account.version == 1
    assert entry.kind == LedgerEntryKind.DEPOSIT
    assert entry.amount == Decimal("25.50")
    assert entry.balance_after == Decimal("25.50")
    assert entry.reference == "dep-1"


def test_deposit_without_reference_generates_a_new_one_each_time() -> None:
    account = AccountFactory()
    first = account_deposit(account_id=account.pk, amount=Decimal("1.00"))
    second = account_deposit(account_id=account.pk, amount=Decimal("1.00"))
    assert first.reference.startswith("dep_")
    assert first.reference != second.reference
    account.refresh_from_db()
    assert account.balance == Decimal("2.00")
    assert account.version == 2


def test_repeated_deposit_reference_returns_the_first_entry_and_deposits_nothing() -> None:
    account = AccountFactory()
    first = account_deposit(account_id=account.pk, amount=Decimal("10.00"), reference="r")
    again = account_deposit(account_id=account.pk, amount=Decimal("10.00"), reference="r")
    assert again.pk == first.pk
    assert (again.amount, again.balance_after, again.created_at) == (
        first.amount,
        first.balance_after,
        first.created_at,
    )
    account.refresh_from_db()
    assert account.balance == Decimal("10.00")
    assert account.version == 1
    assert LedgerEntry.objects.count() == 1


def test_repeated_deposit_reference_with_another_amount_is_a_conflict() -> None:
    account = AccountFactory()
    account_deposit(account_id=account.pk, amount=Decimal("10.00"), reference="r")
    with pytest.raises(LedgerReferenceConflict):
        account_deposit(account_id=account.pk, amount=Decimal("11.00"), reference="r")
    account.refresh_from_db()
    assert account.balance == Decimal("10.00")


def test_same_reference_on_two_accounts_is_two_changes() -> None:
    one, two = AccountFactory(), AccountFactory()
    account_deposit(account_id=one.pk, amount=Decimal("1.00"), reference="same")
    account_deposit(account_id=two.pk, amount=Decimal("1.00"), reference="same")
    assert LedgerEntry.objects.filter(reference="same").count() == 2


def test_deduct_takes_the_amount_and_writes_a_negative_entry() -> None:
    account = funded_account("100.00")
    entry = account_deduct(account_id=account.pk, amount=Decimal("7.25"), reference="pay_1")
    account.refresh_from_db()
    assert account.balance == Decimal("92.75")
    assert account.version == 2
    assert entry.kind == LedgerEntryKind.DEDUCTION
    assert entry.amount == Decimal("-7.25")
    assert entry.balance_after == Decimal("92.75")


def test_deduct_may_empty_the_account_exactly() -> None:
    account = funded_account("7.00")
    account_deduct(account_id=account.pk, amount=Decimal("7.00"), reference="all")
    account.refresh_from_db()
    assert account.balance == Decimal("0.00")


def test_deduct_keeps_cents_exact() -> None:
    account = funded_account("0.30")
    account_deduct(account_id=account.pk, amount=Decimal("0.10"), reference="a")
    account_deduct(account_id=account.pk, amount=Decimal("0.20"), reference="b")
    account.refresh_from_db()
    assert account.balance == Decimal("0.00")
    assert account.version == 3


def test_deduct_more_than_the_balance_raises_and_changes_nothing() -> None:
    account = funded_account("5.00")
    with pytest.raises(InsufficientFunds) as excinfo:
        account_deduct(account_id=account.pk, amount=Decimal("5.01"), reference="too-much")
    assert excinfo.value.balance == Decimal("5.00")
    account.refresh_from_db()
    assert account.balance == Decimal("5.00")
    assert account.version == 1
    assert not LedgerEntry.objects.filter(reference="too-much").exists()


def test_repeated_deduction_returns_the_first_entry_and_deducts_once() -> None:
    account = funded_account("10.00")
    first = account_deduct(account_id=account.pk, amount=Decimal("7.00"), reference="pay_x")
    # The balance (3.00) could not pay 7.00 again: the repeat must not even try.
    again = account_deduct(account_id=account.pk, amount=Decimal("7.00"), reference="pay_x")
    assert again.pk == first.pk
    account.refresh_from_db()
    assert account.balance == Decimal("3.00")
    assert account.version == 2


def test_deduction_under_a_deposit_reference_is_a_conflict() -> None:
    account = funded_account("10.00")
    with pytest.raises(LedgerReferenceConflict):
        account_deduct(account_id=account.pk, amount=Decimal("10.00"), reference="initial")


def test_ledger_unique_reference_is_the_last_line_of_defence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A concurrent writer's entry, invisible to our first look, rolls our update back."""
    account = funded_account("100.00")
    first = account_deduct(account_id=account.pk, amount=Decimal("7.00"), reference="pay_r")
    real_lookup = services._ledger_entry
    calls: list[str] = []

    def miss_once(**kwargs: Any) -> LedgerEntry | None:
        calls.append(kwargs["reference"])
        return None if len(calls) == 1 else real_lookup(**kwargs)

    monkeypatch.setattr(services, "_ledger_entry", miss_once)
    again = account_deduct(account_id=account.pk, amount=Decimal("7.00"), reference="pay_r")
    assert len(calls) == 2
    assert again.pk == first.pk
    account.refresh_from_db()
    assert account.balance == Decimal("93.00")
    assert account.version == 2
    assert LedgerEntry.objects.filter(kind=LedgerEntryKind.DEDUCTION).count() == 1


def test_lost_version_race_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    account = funded_account("100.00")
    real_try = services._try_change
    attempts: list[int] = []

    def lose_twice(**kwargs: Any) -> LedgerEntry | None:
        attempts.append(1)
        if len(attempts) <= 2:
            return None
        return real_try(**kwargs)

    pauses: list[int] = []
    monkeypatch.setattr(services, "_try_change", lose_twice)
    monkeypatch.setattr(services, "_backoff", pauses.append)
    entry = account_deduct(account_id=account.pk, amount=Decimal("1.00"), reference="retry")
    assert len(attempts) == 3
    assert pauses == [1, 2]
    assert entry.balance_after == Decimal("99.00")


def test_version_race_lost_every_time_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    account = funded_account("100.00")
    monkeypatch.setattr(services, "_try_change", lambda **kwargs: None)
    monkeypatch.setattr(services, "_backoff", lambda attempt: None)
    with pytest.raises(AccountConflict) as excinfo:
        account_deduct(account_id=account.pk, amount=Decimal("1.00"), reference="never")
    assert excinfo.value.attempts == services.MAX_ATTEMPTS


def test_unknown_account_raises() -> None:
    with pytest.raises(AccountNotFound):
        account_deduct(account_id=987654, amount=Decimal("1.00"), reference="x")
    with pytest.raises(AccountNotFound):
        account_deposit(account_id=987654, amount=Decimal("1.00"))


def test_balance_cannot_exceed_the_column() -> None:
    account = AccountFactory()
    account_deposit(account_id=account.pk, amount=MAX_AMOUNT, reference="max")
    with pytest.raises(BalanceLimitExceeded):
        account_deposit(account_id=account.pk, amount=Decimal("0.01"), reference="one-more")
    account.refresh_from_db()
    assert account.balance == MAX_AMOUNT


@pytest.mark.parametrize(
    "amount",
    [
        Decimal("0"),
        Decimal("0.00"),
        Decimal("-1.00"),
        Decimal("1.001"),
        Decimal("10000000000.00"),
        Decimal("NaN"),
        Decimal("Infinity"),
        1.5,
        "1.00",
        5,
    ],
)
def test_invalid_amounts_are_rejected(amount: Any) -> None:
    account = funded_account("100.00")
    with pytest.raises(InvalidAmount):
        account_deduct(account_id=account.pk, amount=amount, reference="x")
    with pytest.raises(InvalidAmount):
        account_deposit(account_id=account.pk, amount=amount)
    account.refresh_from_db()
    assert account.balance == Decimal("100.00")


def test_amount_with_fewer_places_is_accepted() -> None:
    account = AccountFactory()
    entry = account_deposit(account_id=account.pk, amount=Decimal("3.5"))
    assert entry.amount == Decimal("3.50")


@pytest.mark.parametrize("reference", ["", "x" * 65, "has space", "ünïcode", "nul\x00", "a/b"])
def test_invalid_references_are_rejected(reference: str) -> None:
    account = funded_account("10.00")
    with pytest.raises(InvalidReference):
        account_deduct(account_id=account.pk, amount=Decimal("1.00"), reference=reference)
    with pytest.raises(InvalidReference):
        account_deposit(account_id=account.pk, amount=Decimal("1.00"), reference=reference)
