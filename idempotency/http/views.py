"""The views the HTTP interfaces serve, and where to find them.

A web framework on top of Django (DRF, Django Ninja) takes part through a
:class:`Framework` its integration's app registers in ``ready()``; the core imports no
framework. ``@idempotent`` marks the functions it wraps with their policy
(:func:`policy_of`); :func:`protected_views` walks a project's URL patterns for those
policies, so the system checks validate what each view configures before a request does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponseBase
from django.urls import URLPattern, URLResolver, get_resolver

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


# -- the protected views of a project -------------------------------------------------------

#: Methods (and viewset actions) that take part.
HANDLER_NAMES = ("post", "put", "patch", "delete")


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
    for func in functions_of(handler):
        policy = policy_of(func)
        if policy is not None:
            yield policy
            return


def view_policies(callback: Any) -> Iterator[Policy]:
    """The policies a view callable (what a URL pattern calls) applies to its requests."""
    policy = policy_of(callback)
    if policy is not None:
        yield policy
    own = _first(lambda framework: framework.view_policies(callback))  # a Ninja path's
    if own is not None:
        yield from own
        return
    cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if not isinstance(cls, type):
        return
    actions = getattr(callback, "actions", None) or {}
    for name in sorted({*HANDLER_NAMES, *actions.values()}):
        yield from handler_policies(getattr(cls, name, None))
    class_policy = _first(lambda framework: framework.class_policy(cls, callback))
    if class_policy is not None:  # DRF: IdempotentMixin's
        yield class_policy


def _patterns(patterns: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            namespace = f"{pattern.namespace}:" if pattern.namespace else ""
            yield from _patterns(pattern.url_patterns, prefix + namespace)
        elif isinstance(pattern, URLPattern):
            yield prefix + (pattern.name or str(pattern.pattern)), pattern.callback


def url_views(urlconf: Any = None) -> Iterator[tuple[str, Any]]:
    """``(view name, callback)`` of every URL pattern the URLconf reaches."""
    yield from _patterns(get_resolver(urlconf).url_patterns, "")


def protected_views(urlconf: Any = None) -> Iterator[tuple[str, Policy]]:
    """``(view name, policy)`` for every policy of every view the URLconf reaches."""
    for name, callback in url_views(urlconf):
        seen: set[int] = set()
        for policy in view_policies(callback):
            if id(policy) not in seen:
                seen.add(id(policy))
                yield name, policy


#: What the wrappers of Django's access decorators are called: ``login_required``,
#: ``permission_required`` and ``staff_member_required`` are all ``user_passes_test``.
_GATE = "user_passes_test."
#: What ``@idempotent``'s own wrappers are called (idempotency.http.decorators).
_IDEMPOTENT = "_wrap.<locals>."
GATE_NAME = "an access decorator (login_required, permission_required, user_passes_test)"


def _chain(func: Any) -> Iterator[str]:
    """The qualified names of ``func`` and the functions it wraps, outermost first."""
    seen: set[int] = set()
    while func is not None and id(func) not in seen:
        seen.add(id(func))
        yield str(getattr(getattr(func, "__code__", None), "co_qualname", ""))
        func = getattr(func, "__wrapped__", None)


def access_gate(view: Any) -> str | None:
    """The access check a view callable makes inside itself, where a replay from outside
    it would skip it (Django's access decorators), or None."""
    return GATE_NAME if any(name.startswith(_GATE) for name in _chain(view)) else None


def gate_below_idempotent(view: Any) -> bool:
    """Whether ``@idempotent`` sits above an access decorator (``@idempotent`` then
    ``@login_required``): its replays would come before the check."""
    below = False
    for name in _chain(view):
        if name.startswith(_IDEMPOTENT):
            below = True
        elif below and name.startswith(_GATE):
            return True
    return False
