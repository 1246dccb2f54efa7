"""Checks of the multi-node settings: REDIS_WAIT_REPLICAS and REDIS_WAIT_TIMEOUT."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from idempotency.checks import check_settings


def _errors(**idempotency: Any) -> list[str]:
    with override_settings(IDEMPOTENCY=idempotency):
        return [m.msg for m in check_settings() if m.id == "idempotency.E004"]


@pytest.mark.parametrize("value", [-1, 1.5, "1", True, None])
def test_wait_replicas_must_be_an_integer_from_zero(value: Any) -> None:
    [error] = _errors(REDIS_WAIT_REPLICAS=value)
    assert "REDIS_WAIT_REPLICAS" in error and "an integer >= 0" in error


@pytest.mark.parametrize("value", [0, -0.5, "1", float("inf")])
def test_wait_timeout_must_be_positive(value: Any) -> None:
    [error] = _errors(REDIS_WAIT_TIMEOUT=value)
    assert "REDIS_WAIT_TIMEOUT" in error and "a number > 0" in error


def test_valid_wait_settings_pass() -> None:
    assert _errors(REDIS_WAIT_REPLICAS=0, REDIS_WAIT_TIMEOUT=0.5) == []
    assert _errors(REDIS_WAIT_REPLICAS=2, REDIS_WAIT_TIMEOUT=3) == []
