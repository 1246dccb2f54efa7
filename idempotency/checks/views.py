"""How the project's views are protected: IdempotencyMiddleware below
AuthenticationMiddleware (E019), and access checks the replays cannot skip (E041, E042)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from idempotency.checks.caches import backend_is
from idempotency.checks.messages import message

_AUTHENTICATION = "django.contrib.auth.middleware.AuthenticationMiddleware"
_IDEMPOTENCY = "idempotency.http.middleware.IdempotencyMiddleware"


def _middleware_index(middleware: list[Any], path: str) -> tuple[int, str] | None:
    """Where the first entry that is (a subclass of) the class at ``path`` sits."""
    for index, entry in enumerate(middleware):
        if isinstance(entry, str) and backend_is(entry, path):
            return index, entry
    return None


def check_middleware() -> list[checks.CheckMessage]:
    """E019: IdempotencyMiddleware placed before AuthenticationMiddleware."""
    middleware = list(getattr(settings, "MIDDLEWARE", None) or ())
    idempotency = _middleware_index(middleware, _IDEMPOTENCY)
    authentication = _middleware_index(middleware, _AUTHENTICATION)
    if idempotency is None or authentication is None or idempotency[0] > authentication[0]:
        return []
    return [message("E019", idempotency=idempotency[1], authentication=authentication[1])]


def check_gates() -> list[checks.CheckMessage]:
    """E041: under IdempotencyMiddleware, a function view that checks access inside itself
    (its replays would skip the check, so the middleware leaves it alone). E042:
    ``@idempotent`` above an access decorator (its replays come before the check)."""
    from idempotency.http.discovery import GATE_NAME, gate_below_idempotent, url_views

    try:
        views = list(url_views())
    except Exception:  # noqa: BLE001 - a broken URLconf is reported by Django
        return []
    middleware = list(getattr(settings, "MIDDLEWARE", None) or ())
    from idempotency.http.middleware import gated_view

    errors = []
    wrapped = _middleware_index(middleware, _IDEMPOTENCY) is not None
    for name, callback in views:
        if gate_below_idempotent(callback):
            errors.append(message("E042", view=name, gate=GATE_NAME))
        elif wrapped and gated_view(callback) is not None:
            errors.append(message("E041", view=name, gate=GATE_NAME))
    return errors
