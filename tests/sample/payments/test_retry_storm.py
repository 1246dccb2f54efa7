"""``manage.py retry_storm``, briefly, against a real server on PostgreSQL.

Its report is checked against the database: the protected endpoint charged each
payment exactly once and the books balance; the naive one charged every
concurrent copy of every payment. And the naive endpoint is not routed in production.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import NoReverseMatch, Resolver404, resolve, reverse

from accounts.models import Account, LedgerEntry, LedgerEntryKind
from payments.models import PaymentRecord
from payments.storm import Side
from payments.storm_report import summary, verdict

PAYMENTS = 4
DUPLICATES = 2


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
def test_a_short_storm_matches_the_database(tmp_path: Path) -> None:
    report = tmp_path / "storm.json"
    call_command(
        "retry_storm",
        f"--payments={PAYMENTS}",
        f"--duplicates={DUPLICATES}",
        "--amount=10.00",
        f"--json={report}",
    )
    sides = json.loads(report.read_text())
    for side in sides.values():
        account = Account.objects.get(pk=side["account_id"])
        deductions = LedgerEntry.objects.filter(account=account, kind=LedgerEntryKind.DEDUCTION)
        assert side["charges"] == deductions.count()
        assert Decimal(side["charged"]) == -sum(e.amount for e in deductions)
        assert Decimal(side["balance"]) == account.balance
        assert side["paid"] == PAYMENTS  # every payment got its answer in the end
        assert side["requests"] >= PAYMENTS * DUPLICATES

    protected = sides["protected"]
    account = Account.objects.get(pk=protected["account_id"])
    assert protected["charges"] == PAYMENTS
    assert protected["charged_orders"] == PAYMENTS  # counted per order, from the ledger
    assert protected["double_charges"] == 0
    assert protected["timeout"] >= 0.25
    assert PaymentRecord.objects.filter(user=account.user).count() == PAYMENTS
    assert Decimal(protected["balance"]) == Decimal(protected["balance_expected"])
    assert account.balance == Decimal(protected["balance_start"]) - PAYMENTS * Decimal("10.00")

    naive = sides["naive"]
    # every copy reached the naive view, and each one charged
    assert naive["charges"] >= PAYMENTS * DUPLICATES
    assert naive["charges"] <= naive["requests"]
    assert naive["charged_orders"] == PAYMENTS
    assert naive["double_charges"] == naive["charges"] - PAYMENTS


def test_the_naive_endpoint_is_not_in_the_production_urlconf() -> None:
    with pytest.raises(NoReverseMatch):
        reverse("naive-pay", kwargs={"pk": 1})
    with pytest.raises(Resolver404):
        resolve("/demo/naive/orders/1/pay/")
    assert resolve("/demo/naive/orders/1/pay/", urlconf="config.urls_demo").url_name == "naive-pay"


# -- the verdict says only what was measured --------------------------------------------


def _side(**values: Any) -> Side:
    side = Side(name=values.pop("name", "protected"), payments=10)
    for name, value in values.items():
        setattr(side, name, value)
    return side


def _sides(protected: Side, naive: Side | None = None) -> dict[str, Side]:
    naive = naive or _side(name="naive", paid=10, charged_orders=10, charges=25, double_charges=15)
    return {"naive": naive, "protected": protected}


def test_no_answers_is_inconclusive_never_exactly_once() -> None:
    timed_out = _side(requests=80, timeouts=80, gave_up=10, charged_orders=0, charges=0)
    (_naive, line) = verdict(_sides(timed_out), Decimal("25.00"))
    assert "inconclusive" in line
    assert "exactly once" not in line and "double" not in line
    assert summary(_sides(timed_out), 1.0).startswith("Verdict: inconclusive")


def test_unanswered_payments_the_database_charged_once_are_still_inconclusive() -> None:
    side = _side(requests=80, timeouts=70, paid=7, gave_up=3, charged_orders=10, charges=10)
    (_naive, line) = verdict(_sides(side), Decimal("25.00"))
    assert "inconclusive" in line and "exactly once" not in line


def test_double_charges_come_from_the_database_not_the_clients_answers() -> None:
    # every answer timed out, yet the ledger holds each order once: no double charge
    once = _side(timeouts=40, paid=0, gave_up=10, charged_orders=10, charges=10)
    assert "double" not in verdict(_sides(once), Decimal("1"))[1]
    # all answered, the ledger holds 13 charges for 10 orders: 3 double charges
    twice = _side(paid=10, charged_orders=10, charges=13, double_charges=3)
    assert "3 double charges (75.00 too much)" in verdict(_sides(twice), Decimal("25.00"))[1]


def test_exactly_once_only_when_every_payment_was_answered_and_charged() -> None:
    side = _side(paid=10, charged_orders=10, charges=10)
    side.balance = side.balance_expected = Decimal("5")
    (_naive, line) = verdict(_sides(side), Decimal("25.00"))
    assert line.endswith("every payment charged exactly once, books balanced.")
    assert summary(_sides(side), 2.0).startswith("Verdict: with the same timeouts")


@pytest.mark.django_db
def test_the_audit_counts_charges_per_order_from_the_ledger() -> None:
    from django.contrib.auth import get_user_model

    from accounts.services import account_deduct, account_deposit, account_get_or_create_for_user
    from payments.storm import _audit

    user = get_user_model().objects.create(username="auditor")
    account = account_get_or_create_for_user(user=user)
    account_deposit(account_id=account.pk, amount=Decimal("100"), reference="funds")
    for reference in ("naive_5_a", "naive_5_b", "naive_6_a", "pay_PAY-7-x"):
        account_deduct(account_id=account.pk, amount=Decimal("1"), reference=reference)
    side = Side(name="naive", payments=4, account_id=account.pk)
    _audit(side, Decimal("100"), [5, 6, 7, 8])
    assert (side.charges, side.charged_orders, side.double_charges) == (4, 3, 1)
    assert side.charged == Decimal("4")
    assert side.balance == side.balance_expected == Decimal("96")
    assert not side.conclusive  # order 8 was never charged
