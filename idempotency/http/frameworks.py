"""The hook through which a web framework on top of Django (DRF, Django Ninja) takes part
in the HTTP interfaces: its integration's app registers a :class:`Framework` in
``ready()`` (``idempotency.contrib.drf``, ``idempotency.contrib.ninja``), and
``@idempotent``, the middleware, the fingerprints and the view discovery ask the
registered ones. The core imports no framework."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponseBase

if TYPE_CHECKING:
    from idempotency.http.answers import Convert, Finalize
    from idempotency.http.options import Policy


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


def request_types() -> tuple[type, ...]:
    """What a view's request may be: Django's, or a registered framework's."""
    return _request_types[0]


def answers(view: Any, request: Any) -> tuple[Convert, Finalize] | None:
    for framework in _registered:
        found = framework.answers(view, request)
        if found is not None:
            return found
    return None


def view_class(cls: type, policy: Policy) -> type | None:
    for framework in _registered:
        found = framework.view_class(cls, policy)
        if found is not None:
            return found
    return None


def handles_keys(cls: type) -> bool:
    return any(framework.handles_keys(cls) for framework in _registered)


def owns(cls: type) -> bool:
    return any(framework.owns(cls) for framework in _registered)


def substitute(cls: type, view_func: Any) -> Callable[..., Any] | None:
    for framework in _registered:
        found = framework.substitute(cls, view_func)
        if found is not None:
            return found
    return None


def class_policy(cls: type, callback: Any) -> Policy | None:
    for framework in _registered:
        found = framework.class_policy(cls, callback)
        if found is not None:
            return found
    return None


def parsed_data(request: Any) -> tuple[Any, Any] | None:
    for framework in _registered:
        found = framework.parsed_data(request)
        if found is not None:
            return found
    return None


def refuse(func: Any, *, built: bool) -> None:
    for framework in _registered:
        framework.refuse(func, built=built)


def mark(wrapped: Any, func: Any) -> None:
    for framework in _registered:
        framework.mark(wrapped, func)


def run(
    func: Any, request: Any, body: Callable[[], Any], policy: Policy, kwargs: Any
) -> HttpResponseBase | None:
    for framework in _registered:
        response = framework.run(func, request, body, policy, kwargs)
        if response is not None:
            return response
    return None


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
    for framework in _registered:
        found = framework.view_policies(callback)
        if found is not None:
            return found
    return None


__all__ = [
    "Framework",
    "answers",
    "arun",
    "class_policy",
    "handles_keys",
    "mark",
    "owns",
    "parsed_data",
    "refuse",
    "register",
    "request_types",
    "run",
    "substitute",
    "takes_own_keys",
    "view_class",
    "view_policies",
]
