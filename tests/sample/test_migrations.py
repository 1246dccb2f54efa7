"""The sample apps' migrations match their models."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_missing_migrations() -> None:
    out = StringIO()
    try:
        call_command(
            "makemigrations", "accounts", "orders", "payments", "--check", "--dry-run", stdout=out
        )
    except SystemExit as exc:  # --check exits 1 when a migration is missing
        pytest.fail(f"models and migrations differ:\n{out.getvalue()}\n(exit {exc.code})")
