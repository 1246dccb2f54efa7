"""Recovery points: read and written through the keyed request's context, on Django's
request and on DRF's, which wraps it; refused outside a keyed request. (A real request
resuming from its recovery point: tests/contract/test_http.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory
from rest_framework.request import Request

from idempotency import get_recovery_point, recovery_point
from idempotency.exceptions import ImproperlyApplied


class Context:
    """What ``request.idempotency`` holds for these functions: the last point, and how a
    new one is saved."""

    def __init__(self) -> None:
        self.recovery_point, self.recovery_data = "", None

    def save_recovery_point(self, name: str, data: Any = None) -> None:
        self.recovery_point, self.recovery_data = name, data


def test_a_point_saved_is_the_point_read_on_djangos_request_and_drfs() -> None:
    request = RequestFactory().post("/")
    request.idempotency = Context()  # type: ignore[attr-defined]
    assert get_recovery_point(request) == ("", None)
    recovery_point(Request(request), "charged", {"charge_id": 7})
    assert get_recovery_point(request) == ("charged", {"charge_id": 7})


def test_a_request_without_a_key_is_refused() -> None:
    request = RequestFactory().post("/")
    with pytest.raises(ImproperlyApplied, match="not handled under an idempotency key"):
        recovery_point(request, "charged")
    with pytest.raises(ImproperlyApplied):
        get_recovery_point(Request(request))
