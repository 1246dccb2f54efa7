"""Recovery points for multi-step work (lease mode), after Brandur Leach's atomic phases.

A view that calls out to the world in several steps records each committed
step; when it fails or its worker dies, the retry with the same key starts
with the last recorded step and resumes after it instead of repeating it::

    @idempotent(mode="lease")
    def checkout(request):
        point, data = get_recovery_point(request)
        if point == "":
            charge = gateway.charge(...)
            recovery_point(request, "charged", {"charge_id": charge.id})
            point, data = "charged", {"charge_id": charge.id}
        if point == "charged":
            ship(data["charge_id"])
        ...
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from idempotency.exceptions import ImproperlyApplied


def _context(request: Any) -> Any:
    context = getattr(request, "idempotency", None)
    if context is None:
        context = getattr(getattr(request, "_request", None), "idempotency", None)
    if context is None:
        raise ImproperlyApplied(
            "This request is not handled under an idempotency key (no key, or no @idempotent)."
        )
    return context


def recovery_point(request: HttpRequest | Any, name: str, data: Any = None) -> None:
    """Record that the phase ``name`` of this keyed request is committed.

    A retry with the same key then starts from it (:func:`get_recovery_point`). The
    write is fenced: a request whose lease was taken over records nothing.

    Args:
        request: The view's request (Django's or DRF's).
        name: The phase just committed, such as ``"charged"``.
        data: JSON-serialisable data the next phases need (a charge id).

    Raises:
        ImproperlyApplied: The request is not handled under an idempotency key.
    """
    _context(request).save_recovery_point(name, data)


def get_recovery_point(request: HttpRequest | Any) -> tuple[str, Any]:
    """``(name, data)`` of the last recorded phase, ``("", None)`` on a first attempt.

    Raises:
        ImproperlyApplied: The request is not handled under an idempotency key.
    """
    context = _context(request)
    return context.recovery_point, context.recovery_data
