"""Scope functions for ``IDEMPOTENCY["SCOPE"]``, named by dotted path in a test's settings."""

from __future__ import annotations

from typing import Any

#: The dotted path of :func:`fixed_scope`.
FIXED_SCOPE = "tests.support.scopes.fixed_scope"


def fixed_scope(request: Any) -> str:
    """One scope for every caller: requests of different users share their keys."""
    return "caller:fixed"
