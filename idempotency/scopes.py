"""Scopes: whose keys are these? A key is only ever looked up inside its scope."""

from __future__ import annotations

from django.http import HttpRequest


def user_scope(request: HttpRequest) -> str | None:
    """``user:<pk>`` for an authenticated caller, None for an anonymous one (the default)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    return f"user:{user.pk}"
