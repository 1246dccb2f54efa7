"""Scopes: whose keys are these? A key is only ever looked up inside its scope."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.crypto import salted_hmac


def principal_of(request: Any) -> Any:
    """The authenticated caller of ``request``, or None for an anonymous one.

    Django Ninja's ``request.auth`` (what the operation's ``auth=`` returned: a user, a
    token string, an API-key object) when Ninja authenticated the request; otherwise
    the authenticated ``request.user`` (Django's middleware, or DRF's authentication: on
    a DRF ``Request`` the principal is always its user, never its ``auth`` token).
    """
    plain = vars(request).get("_request") if hasattr(request, "__dict__") else None
    if plain is None:  # not DRF: Ninja leaves its principal on the HttpRequest itself
        auth = vars(request).get("auth") if hasattr(request, "__dict__") else None
        if auth is not None and auth is not False:
            return auth
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    return user


def principal_scope(principal: Any) -> str | None:
    """The scope of one principal, never shared between principals of different kinds.

    A user: ``user:<pk>``. Another model instance (an API key, a client application):
    ``<app_label>.<model>:<pk>``. A token string (or bytes): ``token:`` and an HMAC of it
    keyed with ``SECRET_KEY``, so the store never holds the token itself (a new
    ``SECRET_KEY`` starts new scopes). Anything else has no stable identity we can
    name: None, treated as anonymous (give the view a ``scope=`` for it).
    """
    is_user = getattr(principal, "is_authenticated", False) is True
    if is_user and getattr(principal, "pk", None) is not None:
        return f"user:{principal.pk}"
    meta = getattr(principal, "_meta", None)
    if meta is not None and getattr(principal, "pk", None) is not None:
        return f"{meta.label_lower}:{principal.pk}"
    if isinstance(principal, str | bytes) and principal:
        digest = salted_hmac("idempotency.scopes.token", principal, algorithm="sha256")
        return f"token:{digest.hexdigest()}"
    return None


def user_scope(request: HttpRequest) -> str | None:
    """The caller's scope (the default): ``user:<pk>`` for an authenticated user,
    :func:`principal_scope` for a Django Ninja principal, None for an anonymous caller."""
    principal = principal_of(request)
    if principal is None:
        return None
    return principal_scope(principal)
