"""What the HTTP interfaces need to know of a view and its call, shared by all of them.

``@idempotent`` marks the functions it wraps with their policy (:func:`policy_of`
reads it back); a request whose key an outer interface already handles is
:func:`in_flow`; :func:`split_view_args` finds the request among a view's arguments.
"""

from __future__ import annotations

from typing import Any

from idempotency.exceptions import ImproperlyApplied
from idempotency.http import frameworks, requests
from idempotency.http.options import Policy

#: Attribute under which ``@idempotent`` leaves its policy on the function it returns.
MARKER = "_idempotency_policy"


def split_view_args(args: tuple[Any, ...], *, decorator: str) -> tuple[Any, Any]:
    """``(view_instance_or_None, request)`` from a view's positional arguments.

    ``decorator`` (``"@idempotent"``) names the culprit when there is no request.
    """
    types = frameworks.request_types()  # Django's, and DRF's once its app registered it
    if args and isinstance(args[0], types):
        return None, args[0]
    if len(args) > 1 and isinstance(args[1], types):
        return args[0], args[1]
    raise ImproperlyApplied(
        f"{decorator} decorates views: the decorated callable was not called with a "
        "request as its first argument (function view) or second argument (view method)."
    )


def in_flow(request: Any) -> bool:
    """Whether an outer interface (the middleware, the mixin, another ``@idempotent``)
    already handles this request's key: an inner one then only runs the view.

    :meth:`~idempotency.http.answers.HttpAnswers.bind` sets ``request.idempotency`` on
    the request it was given, a DRF ``Request`` or the Django one it wraps (its
    ``_request``), and only ever on the instance: both instance dictionaries are read.
    (``getattr`` on a DRF ``Request`` that lacks the attribute raises and catches three
    ``AttributeError`` on every decorated request.)"""
    attributes = vars(request)
    context = attributes.get("idempotency")
    if context is None and "_request" in attributes:
        context = vars(attributes["_request"]).get("idempotency")
    return isinstance(context, requests.IdempotencyContext)


def policy_of(func: Any) -> Policy | None:
    """The policy ``@idempotent`` attached to ``func`` (or a bound method of it)."""
    return getattr(getattr(func, "__func__", func), MARKER, None)
