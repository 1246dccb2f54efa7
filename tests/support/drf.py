"""Whether DRF is installed (not in the ``no-drf`` run, tests/settings_no_drf.py), and the
test cases that need it: a test parametrized over plain Django's views and DRF's collects
DRF's only where it is."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from django.apps import apps

T = TypeVar("T")


def has_drf() -> bool:
    return apps.is_installed("rest_framework")


def with_drf(plain: Iterable[T], drf: Iterable[T]) -> list[T]:
    """``plain``'s cases, then ``drf``'s where DRF is installed."""
    return [*plain, *drf] if has_drf() else list(plain)
