"""``manage.py retry_storm``, briefly, against a real server on PostgreSQL.

Its report is checked against the database: the protected endpoint charged each
payment exactly once and the books balance; the naive one charged every
concurrent copy of every payment. And the naive endpoint is not routed in production.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import NoReverseMatch, Resolver404, resolve, reverse

from accounts.models import Account, LedgerEntry, LedgerEntryKind
from payments.models import PaymentRecord

PAYMENTS = 4
DUPLICATES = 2


@pytest.mark.postgres
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
    assert PaymentRecord.objects.filter(user=account.user).count() == PAYMENTS
    assert Decimal(protected["balance"]) == Decimal(protected["balance_expected"])
    assert account.balance == Decimal(protected["balance_start"]) - PAYMENTS * Decimal("10.00")

    naive = sides["naive"]
    # every copy reached the naive view, and each one charged
    assert naive["charges"] >= PAYMENTS * DUPLICATES
    assert naive["charges"] <= naive["requests"]


def test_the_naive_endpoint_is_not_in_the_production_urlconf() -> None:
    with pytest.raises(NoReverseMatch):
        reverse("naive-pay", kwargs={"pk": 1})
    with pytest.raises(Resolver404):
        resolve("/demo/naive/orders/1/pay/")
    assert resolve("/demo/naive/orders/1/pay/", urlconf="config.urls_demo").url_name == "naive-pay"
