"""Glue between the shared request flow and Django Ninja operations (``[ninja]`` extra).

A Ninja operation is a function whose result Ninja turns into a response *after* it
returns (a dict, a Schema, ``Status(201, body)``, a ``(status, body)`` tuple or an
``HttpResponse``), and whose authentication (``auth=``) runs before it is called.
``@idempotent`` below ``@api.post(...)`` (or :func:`idempotency.ninja.protect`) makes
the wrapped function the operation's ``view_func``, so the flow starts where Ninja
calls it: authentication, throttles and input validation have passed, ``request.auth``
is set. The flow needs the operation itself, to turn the body's result into the
response it stores (Ninja's own conversion, response schemas included) and the body's
exceptions into Ninja's answers (the API's exception handlers): :func:`bind` wraps the
operation's ``run`` so each request carries it, and every copy Ninja makes of the
operation when it mounts a router carries that wrapping too.

Nothing here imports Ninja at module level: ``idempotency`` works without it.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from django.http import HttpRequest, HttpResponseBase

from idempotency.exceptions import ImproperlyApplied

#: Where the operation running a request is left on it (the plain ``HttpRequest``).
OPERATION = "_idempotency_ninja_operation"
#: Marks an operation whose ``run`` already carries the operation to its requests.
BOUND = "_idempotency_bound"
#: Marks an operation whose OpenAPI documents the contract.
DOCUMENTED = "_idempotency_documented"


def loaded() -> bool:
    """Whether Django Ninja is imported at all (if not, nothing can be a Ninja operation)."""
    return "ninja.operation" in sys.modules


def operation_of(request: Any) -> Any:
    """The Ninja operation running ``request``, or None outside one."""
    return vars(request).get(OPERATION) if hasattr(request, "__dict__") else None


def is_operation_run(func: Any) -> bool:
    """Whether ``func`` is an operation's ``run`` (``decorate_view(idempotent)``: it
    would claim the key before Ninja's authentication)."""
    if not loaded():
        return False
    from ninja.operation import Operation

    return isinstance(getattr(func, "__self__", None), Operation)


def called_by_ninja(request: Any) -> bool:
    """Whether ``request`` was routed to a Ninja view (one the flow was not bound to)."""
    match = getattr(request, "resolver_match", None)
    return str(getattr(getattr(match, "func", None), "__module__", "")).startswith("ninja.")


def path_view_of(view_func: Any) -> Any:
    """The Ninja ``PathView`` behind a URL pattern's view, or None for any other view
    (Ninja 1.6+ closes over it; earlier versions hand out its bound method)."""
    if not loaded() or not str(getattr(view_func, "__module__", "")).startswith("ninja."):
        return None
    from ninja.operation import PathView

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
    from idempotency.http.view_marks import policy_of

    policy = policy_of(operation.view_func)
    if policy is not None:
        document(operation, policy)


def document(operation: Any, policy: Any) -> None:
    """Document the contract in the operation's OpenAPI (its ``openapi_extra``, which
    Ninja merges into what it generates): the ``Idempotency-Key`` parameter, the
    ``Idempotent-Replayed`` header of its success responses and the problem answers.
    A status the operation declares itself keeps its description."""
    from idempotency.contrib.openapi import (
        PROBLEM_SCHEMA,
        REPLAYED_HEADER,
        key_parameter,
        problem_answers,
    )
    from idempotency.http.requests import UNSAFE_METHODS
    from idempotency.problems import PROBLEM_CONTENT_TYPE

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
    from idempotency.http import handler as handling

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
    from idempotency.http import handler as handling

    respond, convert = hooks(operation, request, kwargs)

    async def call() -> HttpResponseBase:
        try:
            result = await body()
        except Exception as exc:
            return convert(exc)
        return respond(result)

    return await handling.run_async(request, call, policy)


__all__ = ["bind", "call_async", "call_sync", "contribute", "operation_of"]
