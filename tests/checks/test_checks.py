"""The checks Django runs (idempotency.checks): silence for the defaults, E001, every problem
reported at once, and through ``manage.py check``."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from idempotency.checks import check_settings
from tests.support.checks import LOCMEM, REDIS, ids, one_database, only
from tests.support.stores import CACHE_STORE, using


def test_defaults_produce_no_messages() -> None:
    assert ids(IDEMPOTENCY={}) == []


def test_no_idempotency_setting_at_all_produces_no_messages(
    settings: Any,
) -> None:
    if hasattr(settings, "IDEMPOTENCY"):
        del settings.IDEMPOTENCY
    settings.DATABASES = one_database()
    assert check_settings() == []


@pytest.mark.parametrize("caches", [LOCMEM, REDIS], ids=["locmem", "redis"])
def test_defaults_produce_no_messages_with_either_cache(caches: dict[str, Any]) -> None:
    assert ids(IDEMPOTENCY={}, CACHES=caches) == []


@pytest.mark.parametrize("value", [["TTL", 5], "TTL=5", 42])
def test_e001_not_a_dict(value: Any) -> None:
    only("E001", IDEMPOTENCY=value)


def test_several_problems_are_all_reported() -> None:
    reported = ids(IDEMPOTENCY={"MODE": "x", "TTL": -1, "ANONYMOUS": "x", "TYPO": 1})
    assert sorted(reported) == [
        "idempotency.E002",
        "idempotency.E004",
        "idempotency.E014",
        "idempotency.E014",
    ]


def test_check_command_fails_on_a_bad_setting() -> None:
    with (
        override_settings(IDEMPOTENCY={"MODE": "sometimes"}),
        pytest.raises(SystemCheckError, match=r"idempotency\.E014"),
    ):
        # databases=[]: no database asked, as before Django 6.0 (since then, naming none
        # asks every alias for its features; this test has no database)
        call_command("check", databases=[])


def test_check_command_reports_warnings_without_failing() -> None:
    out = StringIO()
    err = StringIO()
    with override_settings(IDEMPOTENCY={**using(CACHE_STORE)}, CACHES=LOCMEM):
        call_command("check", databases=[], stdout=out, stderr=err)
    assert "idempotency.W001" in out.getvalue() + err.getvalue()
