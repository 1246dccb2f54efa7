"""What ``@idempotent`` cannot wrap, refused with
:class:`~idempotency.exceptions.ImproperlyApplied` instead of doing nothing: generators,
callables that take no request, async views in atomic mode, Django Ninja's operations
decorated in the wrong place, views that declare or return something that is not a
response.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.http import HttpResponseBase

from idempotency.exceptions import ImproperlyApplied
from idempotency.http import frameworks
from idempotency.http.options import Policy

__all__ = [
    "checked_response",
    "declared_non_response",
    "refuse_non_response",
    "refuse_unwrappable",
]


def _positional_slots(func: Callable[..., Any]) -> int | None:
    """How many positional arguments ``func`` takes (None: any number, or unknown)."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)


def declared_non_response(func: Callable[..., Any]) -> Any:
    """The return annotation of ``func`` when it names something that is not a response
    (``-> dict``, ``-> MySchema``, ``-> None``), else None (a response, or not declared).

    A Django view must return one; a Ninja operation may return anything Ninja can turn
    into one, so the flow only holds it against a view that is not a Ninja operation."""
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # an annotation that does not resolve: nothing declared we can read
        return None
    if "return" not in hints:
        return None
    declared = hints["return"]
    members = typing.get_args(declared) if _is_union(declared) else (declared,)
    for member in members:
        origin = typing.get_origin(member) or member
        if member is Any or member is object:
            return None
        if isinstance(origin, type) and issubclass(origin, HttpResponseBase):
            return None
        if isinstance(origin, type) and issubclass(HttpResponseBase, origin):
            return None  # a base of the responses (object aside, handled above)
        if member is not type(None) and not isinstance(origin, type):
            return None  # a TypeVar, a Protocol alias, a forward string: not ours to judge
    return declared


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def refuse_unwrappable(func: Callable[..., Any], policy: Policy, *, built: bool) -> None:
    """What ``@idempotent`` can tell it cannot wrap from the callable alone: refused now,
    before any body can run."""
    name = getattr(func, "__qualname__", repr(func))
    frameworks.refuse(func, built=built)  # Django Ninja: an operation's run, or built
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        raise ImproperlyApplied(
            f"@idempotent cannot wrap the generator {name}: its items are produced after it "
            "returns, so there is no response to store. Return a (streaming) response instead."
        )
    if _positional_slots(func) == 0:
        raise ImproperlyApplied(
            f"@idempotent decorates views: {name} takes no positional argument, so it cannot "
            "be called with a request."
        )
    if iscoroutinefunction(func) and policy.mode == "atomic":
        raise ImproperlyApplied(
            f"@idempotent(mode='atomic') on the async {name}: a transaction cannot span an "
            "await; async views run in lease mode."
        )


def refuse_non_response(func: Callable[..., Any], declared: Any) -> None:
    """A view that is not a Ninja operation declares a result that is not a response."""
    raise ImproperlyApplied(
        f"@idempotent on {getattr(func, '__qualname__', func)!r}, a view that is not a Django "
        f"Ninja operation, declares it returns {declared!r}: a view must return an "
        "HttpResponse. (Under Ninja, put @idempotent directly below the route decorator.)"
    )


def checked_response(func: Callable[..., Any], result: Any) -> HttpResponseBase:
    """The view's result, which must be a response: anything else is refused (the flow
    then releases the key, as for any exception of the view)."""
    if not isinstance(result, HttpResponseBase):
        raise ImproperlyApplied(
            f"@idempotent on {getattr(func, '__qualname__', func)!r}: the view returned "
            f"{type(result).__name__}, not an HttpResponse; nothing was stored and the key was "
            "released. Return a response (under Django Ninja, put @idempotent directly below "
            "the route decorator)."
        )
    return result
