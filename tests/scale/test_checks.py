"""Checks of the multi-node options of a Redis store: wait_replicas and wait_timeout."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from idempotency.checks import check_settings
from tests.support.stores import REDIS_STORE, using


def _errors(**options: Any) -> list[str]:
    with override_settings(IDEMPOTENCY=using(REDIS_STORE, location="redis://r/0", **options)):
        return [m.msg for m in check_settings() if m.id == "idempotency.E064"]


@pytest.mark.parametrize("value", [-1, 1.5, "1", True, None])
def test_wait_replicas_must_be_an_integer_from_zero(value: Any) -> None:
    [error] = _errors(wait_replicas=value)
    assert "['OPTIONS']['wait_replicas']" in error and "an integer >= 0" in error


@pytest.mark.parametrize("value", [0, -0.5, "1", float("inf")])
def test_wait_timeout_must_be_positive(value: Any) -> None:
    [error] = _errors(wait_timeout=value)
    assert "['OPTIONS']['wait_timeout']" in error and "a number > 0" in error


def test_valid_wait_settings_pass() -> None:
    assert _errors(wait_replicas=0, wait_timeout=0.5) == []
    assert _errors(wait_replicas=2, wait_timeout=3) == []
