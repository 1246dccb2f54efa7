"""Django Ninja (optional: ``pip install "/path/to/django-idempotency[ninja]"``): add
``"idempotency.contrib.ninja"`` to ``INSTALLED_APPS``, then ``@idempotent`` directly below
``@api.post(...)`` protects one operation, and :func:`protect` every unsafe operation of a
router or an API.

How it works. Ninja turns an operation's result into a response *after* the function
returns, and authenticates (``auth=``) before calling it. ``@idempotent`` below
``@api.post(...)`` (or :func:`protect`) makes the wrapped function the operation's
``view_func``, so the flow starts once authentication, throttles and input validation
have passed. It needs the operation itself, to turn the result into the response it
stores (Ninja's conversion, response schemas included) and exceptions into the API's
answers: :func:`bind` wraps the operation's ``run`` so each request carries it, in every
copy Ninja makes of the operation when it mounts a router.

:func:`protect` puts every unsafe operation (POST, PUT, PATCH, DELETE) of a router or an
API under one policy, those of its sub-routers too, including operations and routers
added after the call::

    api = NinjaAPI(auth=ApiKey())
    protect(api, required=True)

An operation decorated with ``@idempotent`` keeps its own options, one marked
:func:`~idempotency.idempotency_exempt` is left alone. Ninja's own ``add_decorator``
cannot carry the flow (it wraps each mounted copy's function after the operation is
built, where the flow cannot reach the operation), and is refused when the URLs are
built; ``protect()`` wraps the operations themselves, before Ninja mounts them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponseBase
from django.utils.module_loading import import_string
from ninja import NinjaAPI, Router
from ninja.operation import Operation, PathView

from idempotency.contrib.openapi import (
    PROBLEM_SCHEMA,
    REPLAYED_HEADER,
    key_parameter,
    problem_answers,
)
from idempotency.exceptions import PROBLEM_CONTENT_TYPE, ImproperlyApplied
from idempotency.http import handler as handling
from idempotency.http.decorators import policy_from, wrap_operation
from idempotency.http.options import Policy
from idempotency.http.requests import UNSAFE_METHODS
from idempotency.http.views import Framework, handler_policies, policy_of

T = TypeVar("T")

#: Where the operation running a request is left on it (the plain ``HttpRequest``).
OPERATION = "_idempotency_ninja_operation"
#: Marks an operation whose ``run`` already carries the operation to its requests.
BOUND = "_idempotency_bound"
#: Marks an operation whose OpenAPI documents the contract.
DOCUMENTED = "_idempotency_documented"


def operation_of(request: Any) -> Any:
    """The Ninja operation running ``request``, or None outside one."""
    return vars(request).get(OPERATION) if hasattr(request, "__dict__") else None


def is_operation_run(func: Any) -> bool:
    """Whether ``func`` is an operation's ``run`` (``decorate_view(idempotent)``: it
    would claim the key before Ninja's authentication)."""
    return isinstance(getattr(func, "__self__", None), Operation)


def called_by_ninja(request: Any) -> bool:
    """Whether ``request`` was routed to a Ninja view (one the flow was not bound to)."""
    match = getattr(request, "resolver_match", None)
    return str(getattr(getattr(match, "func", None), "__module__", "")).startswith("ninja.")


def path_view_of(view_func: Any) -> Any:
    """The Ninja ``PathView`` behind a URL pattern's view, or None for any other view
    (Ninja 1.6+ closes over it; earlier versions hand out its bound method)."""
    if not str(getattr(view_func, "__module__", "")).startswith("ninja."):
        return None
    owner = getattr(view_func, "__self__", None)
    if isinstance(owner, PathView):
        return owner
    for cell in getattr(view_func, "__closure__", None) or ():
        if isinstance(cell.cell_contents, PathView):
            return cell.cell_contents
    return None


def _bound_run(operation: Any, run: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` that leaves ``operation`` on each request before running it."""
    if inspect.iscoroutinefunction(run):

        @functools.wraps(run)
        async def arun(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            setattr(request, OPERATION, operation)
            return await run(request, *args, **kwargs)

        return arun

    @functools.wraps(run)
    def srun(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        setattr(request, OPERATION, operation)
        return run(request, *args, **kwargs)

    return srun


def _rebind(run: Callable[..., Any]) -> Callable[..., Any]:
    """The run decorator Ninja re-applies to each copy of an operation (first, so ``run``
    is still the copy's own bound method)."""
    operation = getattr(run, "__self__", None)
    if operation is None:  # pragma: no cover - Ninja applies its run decorators in order
        raise ImproperlyApplied(
            "@idempotent could not find the Ninja operation of a mounted copy; this version "
            "of django-ninja is not supported."
        )
    return _bound_run(operation, run)


def bind(operation: Any) -> None:
    """Make ``operation`` (and the copies Ninja mounts of it) carry itself to its requests.

    Refuses, when the operation is built (at import time), what the flow cannot wrap: a
    streaming operation (its body yields after the response is sent), or a Ninja
    without the operation's result conversion.
    """
    if getattr(operation, BOUND, False):
        return
    if getattr(operation, "stream_format", None) is not None:
        raise ImproperlyApplied(
            f"@idempotent cannot wrap the streaming Ninja operation {operation.path!r}: its "
            "items are produced after the response starts, so there is no response to store."
        )
    if not callable(getattr(operation, "_result_to_response", None)):  # pragma: no cover
        raise ImproperlyApplied("@idempotent needs django-ninja 1.3 or later.")
    operation.run = _bound_run(operation, operation.run)
    # Ninja 1.6+ copies operations when it mounts a router and re-applies these
    # decorators to each copy's run (as it does for decorate_view): ours goes first.
    decorators = list(getattr(operation, "_run_decorators", []))
    operation._run_decorators = [_rebind, *decorators]
    setattr(operation, BOUND, True)


def contribute(operation: Any) -> None:
    """Ninja's hook for what decorates an operation's function: called once per
    operation built from it (``_ninja_contribute_to_operation``)."""
    bind(operation)
    policy = policy_of(operation.view_func)
    if policy is not None:
        document(operation, policy)


def document(operation: Any, policy: Any) -> None:
    """Document the contract in the operation's OpenAPI (its ``openapi_extra``, which
    Ninja merges into what it generates): the ``Idempotency-Key`` parameter, the
    ``Idempotent-Replayed`` header of its success responses and the problem answers.
    A status the operation declares itself keeps its description."""
    if getattr(operation, DOCUMENTED, False):
        return
    if not UNSAFE_METHODS.intersection(method.upper() for method in operation.methods):
        return
    declared = {status for status in operation.response_models if isinstance(status, int)}
    responses: dict[int, dict[str, Any]] = {
        status: {"headers": dict(REPLAYED_HEADER)} for status in declared if status // 100 == 2
    }
    for status, description, headers in problem_answers(policy):
        answer: dict[str, Any] = {"content": {PROBLEM_CONTENT_TYPE: {"schema": PROBLEM_SCHEMA}}}
        if status not in declared:
            answer["description"] = description
        if headers:
            answer["headers"] = dict(headers)
        responses[status] = answer
    extra = dict(operation.openapi_extra or {})
    merge(extra, {"parameters": [key_parameter(policy)], "responses": responses})
    operation.openapi_extra = extra
    setattr(operation, DOCUMENTED, True)


def merge(into: dict[Any, Any], extra: dict[Any, Any]) -> None:
    """Merge ``extra`` into ``into``: dictionaries key by key, lists appended."""
    for key, value in extra.items():
        mine = into.get(key)
        if isinstance(mine, dict) and isinstance(value, dict):
            merge(mine, value)
        elif isinstance(mine, list) and isinstance(value, list):
            into[key] = [*mine, *value]
        else:
            into[key] = value


def _temporal_response(operation: Any, request: HttpRequest, kwargs: dict[str, Any]) -> Any:
    """The response Ninja gave the operation to set headers and cookies on, or a new one."""
    name = getattr(operation.signature, "response_arg", None)
    if name and name in kwargs:
        return kwargs[name]
    return operation.api.create_temporal_response(request)


def hooks(
    operation: Any, request: HttpRequest, kwargs: dict[str, Any]
) -> tuple[Callable[[Any], HttpResponseBase], Callable[[Exception], HttpResponseBase]]:
    """How to turn the body's result into Ninja's response, and its exceptions into the
    API's answers (its exception handlers; what none handles propagates)."""
    temporal = _temporal_response(operation, request, kwargs)

    def respond(result: Any) -> HttpResponseBase:
        response: HttpResponseBase = operation._result_to_response(request, result, temporal)
        return response

    def convert(exc: Exception) -> HttpResponseBase:
        response: HttpResponseBase = operation.api.on_exception(request, exc)
        return response

    return respond, convert


def call_sync(
    operation: Any, request: HttpRequest, body: Callable[[], Any], policy: Any, kwargs: Any
) -> HttpResponseBase:
    """Run a sync operation's ``body`` under the flow; its result becomes Ninja's response
    inside it (atomic mode: inside the transaction), so that response is what is stored."""
    respond, convert = hooks(operation, request, kwargs)
    return handling.run(request, lambda: respond(body()), policy, convert=convert)


async def call_async(
    operation: Any,
    request: HttpRequest,
    body: Callable[[], Awaitable[Any]],
    policy: Any,
    kwargs: Any,
) -> HttpResponseBase:
    """:func:`call_sync` for async operations (lease mode). The body's exceptions that the
    API's handlers answer (``HttpError``, ``ValidationError``…) become their response, and
    are stored as the sync path stores them; what none handles releases the key."""
    respond, convert = hooks(operation, request, kwargs)

    async def call() -> HttpResponseBase:
        try:
            result = await body()
        except Exception as exc:
            return convert(exc)
        return respond(result)

    return await handling.run_async(request, call, policy)


#: Where :func:`protect` leaves its policy on a router (a sub-router keeps its own).
POLICY = "_idempotency_policy"


def takes_part(methods: Iterable[str], view_func: Any) -> bool:
    """Whether an operation of ``methods`` running ``view_func`` is one to protect: an
    unsafe method, not ``@idempotent`` itself (it keeps its options), not exempt."""
    if not UNSAFE_METHODS.intersection(method.upper() for method in methods):
        return False
    exempt = bool(getattr(view_func, "idempotency_exempt", False))
    return policy_of(view_func) is None and not exempt


def protect_operation(operation: Any, policy: Policy) -> None:
    """Put one built operation under ``policy`` (unless it takes no part)."""
    if not takes_part(operation.methods, operation.view_func):
        return
    operation.view_func = wrap_operation(operation.view_func, policy)
    contribute(operation)


def _routers_of(target: Any) -> list[Any]:
    """The routers mounted on a router or an API (one level down)."""
    return [entry[1] for entry in getattr(target, "_routers", ())]


def _protect_router(router: Any, policy: Policy) -> None:
    if getattr(router, POLICY, None) is not None:
        return  # protected already, maybe with options of its own
    if getattr(router, "_frozen", False):
        raise ImproperlyApplied(
            "protect() came after the router's URLs were built (api.urls): Ninja has "
            "mounted copies of its operations already. Call it where the router is defined."
        )
    setattr(router, POLICY, policy)
    for path_view in list(router.path_operations.values()):
        for operation in path_view.operations:
            protect_operation(operation, policy)
    add_api_operation = router.add_api_operation
    add_router = router.add_router

    def protected_add_api_operation(
        path: str, methods: list[str], view_func: Callable[..., Any], **kwargs: Any
    ) -> Any:
        if takes_part(methods, view_func):
            view_func = wrap_operation(view_func, policy)
        return add_api_operation(path, methods, view_func, **kwargs)

    router.add_api_operation = protected_add_api_operation
    router.add_router = _protecting(add_router, policy)
    for child in _routers_of(router):
        _protect_router(child, policy)


def _protecting(add_router: Callable[..., Any], policy: Policy) -> Callable[..., Any]:
    """``add_router`` that protects the router it mounts (a dotted path too)."""

    def protected_add_router(prefix: str, router: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(router, str):
            router = import_string(router)
        result = add_router(prefix, router, *args, **kwargs)
        _protect_router(router, policy)
        return result

    return protected_add_router


def protect(target: T, /, **options: Any) -> T:
    """Put every unsafe operation of ``target`` under ``@idempotent(**options)``.

    ``target`` is a ``ninja.Router`` or a ``NinjaAPI``: its operations, its sub-routers',
    and those added later. Call it before the API's URLs are built (where the API or
    router is defined). The options are ``@idempotent``'s. Returns ``target``.

    Raises:
        TypeError: For an unknown option.
        ImproperlyApplied: After ``api.urls``, or for an operation that cannot be
            wrapped (a streaming one: exempt it with ``@idempotency_exempt``).
    """
    policy = policy_from(options, "protect")
    if isinstance(target, NinjaAPI):
        if getattr(target, "_bound_routers_cache", None) is not None:
            raise ImproperlyApplied("protect() came after api.urls; call it before.")
        for router in _routers_of(target):
            _protect_router(router, policy)
        # replaced on purpose: the routers this API adds later are protected too
        target.add_router = _protecting(target.add_router, policy)  # type: ignore[method-assign]
    elif isinstance(target, Router):
        _protect_router(target, policy)
    else:
        raise ImproperlyApplied(f"protect() takes a NinjaAPI or a ninja.Router, not {target!r}")
    return target


def refuse_unbound(func: Callable[..., Any]) -> None:
    """A view runs inside a Ninja operation it was not bound to."""
    raise ImproperlyApplied(
        f"@idempotent on {getattr(func, '__qualname__', func)!r} runs inside a Django Ninja "
        "operation it was not bound to (Router.add_decorator or a wrapper around the route): "
        "it cannot turn the result into Ninja's response. Put @idempotent directly below the "
        "route decorator, or use idempotency.contrib.ninja.protect(api_or_router)."
    )


class DjangoNinja(Framework):
    """Django Ninja's operations: the flow runs where Ninja calls the operation's function
    (after its authentication), and turns the result into Ninja's response."""

    def refuse(self, func: Any, *, built: bool) -> None:
        name = getattr(func, "__qualname__", repr(func))
        if is_operation_run(func):
            raise ImproperlyApplied(
                "@idempotent was applied to a Ninja operation's run (decorate_view, or "
                'add_decorator(..., mode="view")): it would claim the key before Ninja '
                "authenticates the caller. Put @idempotent directly below the route "
                "decorator (@api.post(...)), or use "
                "idempotency.contrib.ninja.protect(api_or_router)."
            )
        if not built and getattr(func, "_ninja_operation", None) is not None:
            raise ImproperlyApplied(
                f"@idempotent was applied to {name} after Django Ninja built its operation "
                "(above the route decorator, or through Router/NinjaAPI.add_decorator): the "
                "flow could not reach the operation. Put @idempotent directly below "
                "@api.post(...), or use idempotency.contrib.ninja.protect(api_or_router) for "
                "a whole router."
            )

    def mark(self, wrapped: Any, func: Any) -> None:
        # Django Ninja builds an operation from the function: it calls this hook with it
        callbacks = list(getattr(func, "_ninja_contribute_to_operation", []))
        vars(wrapped)["_ninja_contribute_to_operation"] = [contribute, *callbacks]

    def run(
        self, func: Any, request: Any, body: Callable[[], Any], policy: Policy, kwargs: Any
    ) -> HttpResponseBase | None:
        operation = operation_of(request)
        if operation is not None:
            return call_sync(operation, request, body, policy, kwargs)
        if called_by_ninja(request):
            refuse_unbound(func)
        return None

    async def arun(
        self,
        func: Any,
        request: Any,
        body: Callable[[], Awaitable[Any]],
        policy: Policy,
        kwargs: Any,
    ) -> HttpResponseBase | None:
        operation = operation_of(request)
        if operation is not None:
            return await call_async(operation, request, body, policy, kwargs)
        if called_by_ninja(request):
            refuse_unbound(func)
        return None

    def takes_own_keys(self, view_func: Any) -> bool:
        path_view = path_view_of(view_func)
        if path_view is None:
            return False
        # Ninja authenticates inside the view: its operations take the key themselves,
        # after authentication (decorated ones with their own options)
        for operation in path_view.operations:
            protect_operation(operation, Policy())
        return True

    def view_policies(self, callback: Any) -> Iterator[Policy] | None:
        path_view = path_view_of(callback)
        if path_view is None:
            return None
        return (
            policy
            for operation in path_view.operations
            for policy in handler_policies(operation.view_func)
        )


__all__ = [
    "DjangoNinja",
    "bind",
    "call_async",
    "call_sync",
    "contribute",
    "operation_of",
    "protect",
    "protect_operation",
]
