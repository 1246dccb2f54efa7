"""The views the HTTP interfaces serve: the frameworks that serve them, and their marks.

A web framework on top of Django (DRF, Django Ninja) takes part through a
:class:`Framework` its integration's app registers in ``ready()``; the core imports no
framework. ``@idempotent`` marks the functions it wraps with their policy
(:func:`policy_of`, :func:`handler_policies`); the system checks find those policies
in a project's URL patterns (:func:`idempotency.checks.protected_views`), and the
middleware the access decorators a replay would skip
(:func:`idempotency.http.middleware.access_gate`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from django.db import connections, transaction
from django.http import HttpRequest, HttpResponseBase

from idempotency.exceptions import ImproperlyApplied
from idempotency.http.options import Policy

#: The view, called with the request it was given.
Call = Callable[[], HttpResponseBase]
#: Turns an exception of a view into the framework's response, or raises it again.
Convert = Callable[[Exception], HttpResponseBase]
#: Renders a response so its bytes can be stored (DRF's ``finalize_response``).
Finalize = Callable[[HttpResponseBase], HttpResponseBase]

T = TypeVar("T")


class Framework:
    """What a framework tells the HTTP interfaces of its views. Every method answers
    "not one of mine" by default; an integration overrides the ones its views need."""

    #: The request classes its views receive instead of Django's ``HttpRequest``.
    request_types: tuple[type, ...] = ()

    def answers(self, view: Any, request: Any) -> tuple[Convert, Finalize] | None:
        """How the framework's view of this call (``view``, the instance a decorated
        method belongs to, or None) turns exceptions into responses and renders them."""
        return None

    def view_class(self, cls: type, policy: Policy) -> type | None:
        """``@idempotent`` on a view class of the framework: the class, keys handled."""
        return None

    def handles_keys(self, cls: type) -> bool:
        """Whether instances of ``cls`` handle their keys themselves (a mixin)."""
        return False

    def owns(self, cls: type) -> bool:
        """Whether ``cls`` is a view class of the framework, which checks access
        inside its own dispatch (the middleware then uses :meth:`substitute`)."""
        return False

    def substitute(self, cls: type, view_func: Any) -> Callable[..., Any] | None:
        """The view the middleware calls instead of ``view_func`` (the ``as_view()`` of
        ``cls``): one that handles keys after the framework's own checks."""
        return None

    def class_policy(self, cls: type, callback: Any) -> Policy | None:
        """The policy a view class of the framework applies to its requests."""
        return None

    def parsed_data(self, request: Any) -> tuple[Any, Any] | None:
        """``(data, files)`` the framework's request already parsed from the body, or
        None (the fingerprint then parses the body itself)."""
        return None

    def refuse(self, func: Any, *, built: bool) -> None:
        """Raise :class:`~idempotency.exceptions.ImproperlyApplied` when ``@idempotent``
        cannot wrap ``func`` in this framework (``built``: the function of an operation
        the framework built already, wrapped in place)."""

    def mark(self, wrapped: Any, func: Any) -> None:
        """Leave on ``wrapped`` (``@idempotent``'s wrapper of ``func``) what the framework
        reads from a view function when it builds its route."""

    def run(
        self, func: Any, request: Any, body: Callable[[], Any], policy: Policy, kwargs: Any
    ) -> HttpResponseBase | None:
        """Run a call of the framework's own (``body()`` returns what ``func`` returns)
        under ``policy`` and answer it, or None when this call is not one of its own."""
        return None

    async def arun(
        self,
        func: Any,
        request: Any,
        body: Callable[[], Awaitable[Any]],
        policy: Policy,
        kwargs: Any,
    ) -> HttpResponseBase | None:
        """:meth:`run` for async views."""
        return None

    def takes_own_keys(self, view_func: Any) -> bool:
        """Whether the framework's view behind a URL pattern takes its keys itself (the
        middleware then leaves it alone)."""
        return False

    def view_policies(self, callback: Any) -> Iterator[Policy] | None:
        """The policies the framework's view behind a URL pattern applies, or None."""
        return None


_registered: list[Framework] = []
_request_types: list[tuple[type, ...]] = [(HttpRequest,)]


def register(framework: Framework) -> None:
    """Let ``framework`` take part (once per class: registering again replaces it)."""
    _registered[:] = [f for f in _registered if type(f) is not type(framework)]
    _registered.append(framework)
    types: tuple[type, ...] = (HttpRequest,)
    for each in _registered:
        types += each.request_types
    _request_types[0] = types


def _first(ask: Callable[[Framework], T | None]) -> T | None:
    """The first registered framework's answer that is not None."""
    for framework in _registered:
        found = ask(framework)
        if found is not None:
            return found
    return None


def answers(view: Any, request: Any) -> tuple[Convert, Finalize] | None:
    return _first(lambda framework: framework.answers(view, request))


def view_class(cls: type, policy: Policy) -> type | None:
    return _first(lambda framework: framework.view_class(cls, policy))


def handles_keys(cls: type) -> bool:
    return any(framework.handles_keys(cls) for framework in _registered)


def owns(cls: type) -> bool:
    return any(framework.owns(cls) for framework in _registered)


def substitute(cls: type, view_func: Any) -> Callable[..., Any] | None:
    return _first(lambda framework: framework.substitute(cls, view_func))


def parsed_data(request: Any) -> tuple[Any, Any] | None:
    return _first(lambda framework: framework.parsed_data(request))


def refuse(func: Any, *, built: bool) -> None:
    for framework in _registered:
        framework.refuse(func, built=built)


def mark(wrapped: Any, func: Any) -> None:
    for framework in _registered:
        framework.mark(wrapped, func)


def run(
    func: Any, request: Any, body: Callable[[], Any], policy: Policy, kwargs: Any
) -> HttpResponseBase | None:
    return _first(lambda framework: framework.run(func, request, body, policy, kwargs))


async def arun(
    func: Any, request: Any, body: Callable[[], Awaitable[Any]], policy: Policy, kwargs: Any
) -> HttpResponseBase | None:
    for framework in _registered:
        response = await framework.arun(func, request, body, policy, kwargs)
        if response is not None:
            return response
    return None


def takes_own_keys(view_func: Any) -> bool:
    return any(framework.takes_own_keys(view_func) for framework in _registered)


def view_policies(callback: Any) -> Iterator[Policy] | None:
    return _first(lambda framework: framework.view_policies(callback))


def class_policy(cls: type, callback: Any) -> Policy | None:
    return _first(lambda framework: framework.class_policy(cls, callback))


def atomic_requests(view: Callable[..., Any], view_func: Any) -> Callable[..., Any]:
    """``view``, which the middleware calls instead of ``view_func`` (a framework's
    :meth:`~Framework.substitute`, or Django's class-based view), under the
    ``ATOMIC_REQUESTS`` rule Django applies to the view it resolved, ``view_func``
    (with its ``non_atomic_requests`` opt-out)."""
    non_atomic: set[str] = getattr(view_func, "_non_atomic_requests", set())
    for alias, settings_dict in connections.settings.items():
        if settings_dict["ATOMIC_REQUESTS"] and alias not in non_atomic:
            view = transaction.atomic(using=alias)(view)
    return view


# -- the mark of @idempotent --------------------------------------------------------------

#: Attribute under which ``@idempotent`` leaves its policy on the function it returns.
MARKER = "_idempotency_policy"


def policy_of(func: Any) -> Policy | None:
    """The policy ``@idempotent`` attached to ``func`` (or a bound method of it)."""
    return getattr(getattr(func, "__func__", func), MARKER, None)


def split_view_args(args: tuple[Any, ...], *, decorator: str) -> tuple[Any, Any]:
    """``(view_instance_or_None, request)`` from a view's positional arguments: the
    request is Django's, or a registered framework's. ``decorator`` (``"@idempotent"``)
    names the culprit when there is no request."""
    types = _request_types[0]
    if args and isinstance(args[0], types):
        return None, args[0]
    if len(args) > 1 and isinstance(args[1], types):
        return args[0], args[1]
    raise ImproperlyApplied(
        f"{decorator} decorates views: the decorated callable was not called with a "
        "request as its first argument (function view) or second argument (view method)."
    )


def functions_of(handler: Any) -> Iterator[Any]:
    """``handler`` and the functions it closes over (``@api_view`` wraps the view)."""
    func = getattr(handler, "__func__", handler)
    yield func
    for cell in getattr(func, "__closure__", None) or ():
        try:
            content = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(content) and not isinstance(content, type):
            yield content


def handler_policies(handler: Any) -> Iterator[Policy]:
    """The policy ``@idempotent`` left on ``handler`` or a function it closes over (one at
    most)."""
    for func in functions_of(handler):
        policy = policy_of(func)
        if policy is not None:
            yield policy
            return
