"""``@idempotent`` for views, and ``@idempotency_exempt`` for the middleware.

``@idempotent`` works on function views, on methods of Django's class-based
views and DRF's ``APIView`` (``def post(self, request)``), on viewset
actions, on ``@api_view`` functions (put it below ``@api_view``) and on a
DRF view class (it mixes in :class:`~idempotency.contrib.drf.mixins.IdempotentMixin`).
Sync and async functions alike. On ``dispatch`` (``method_decorator(idempotent,
name="dispatch")``) it handles the key around the handler ``dispatch`` calls, after
the checks ``dispatch`` makes first (:func:`defer_to_handler`), never before them.
Applied anywhere it cannot work (generators, callables that take no request, async
views in atomic mode, Django Ninja's operations decorated in the wrong place, views that
declare or return something that is not a response), it raises
:class:`~idempotency.exceptions.ImproperlyApplied` instead of doing nothing.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar, overload

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpResponseBase
from django.views import View

from idempotency.exceptions import ImproperlyApplied
from idempotency.http import handler as handling
from idempotency.http import views
from idempotency.http.options import Policy, ReplayHook
from idempotency.http.requests import UNSAFE_METHODS, in_flow
from idempotency.http.views import MARKER, policy_of, split_view_args

F = TypeVar("F", bound=Callable[..., Any])


# -- what it cannot wrap ---------------------------------------------------------------


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
    union = typing.get_origin(declared) in (typing.Union, types.UnionType)
    members = typing.get_args(declared) if union else (declared,)
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


def refuse_unwrappable(func: Callable[..., Any], policy: Policy, *, built: bool) -> None:
    """What ``@idempotent`` can tell it cannot wrap from the callable alone: refused now,
    before any body can run."""
    name = getattr(func, "__qualname__", repr(func))
    views.refuse(func, built=built)  # Django Ninja: an operation's run, or built
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
    """A view that is not a Ninja operation declares a result that is not a response
    (``declared``: :func:`declared_non_response`, None when it declares none)."""
    if declared is None:
        return
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


# -- wrapping ---------------------------------------------------------------------------


def _dispatch_owner(func: Any, args: tuple[Any, ...]) -> View | None:
    """The class-based view whose ``dispatch`` ``func`` is, or None: decorated in the
    class body (``args[0]`` is the view) or with ``method_decorator(idempotent,
    name="dispatch")`` (``func`` is a partial of the bound method)."""
    if args and isinstance(args[0], View):
        return args[0]
    owner = getattr(getattr(func, "func", None), "__self__", None)
    return owner if isinstance(owner, View) else None


def defer_to_handler(view: View, request: Any, policy: Policy) -> None:
    """Handle the key around the handler ``view.dispatch`` is about to call for
    ``request`` (``post``, ``put``, ...), not around ``dispatch`` itself: what
    ``dispatch`` checks first (DRF's authentication, permissions and throttles in
    ``initial()``; Django's ``LoginRequiredMixin``, ``PermissionRequiredMixin``,
    ``UserPassesTestMixin``) then runs before any replay, as it runs before the view.
    Set on the view instance, which lives for this one request."""
    method = str(request.method or "")
    if method not in UNSAFE_METHODS or method.lower() not in view.http_method_names:
        return
    handler = getattr(view, method.lower(), None)
    if handler is None or policy_of(handler) is not None or views.handles_keys(type(view)):
        return  # no such method (405 follows), or keys handled there already
    setattr(view, method.lower(), _wrap(handler, policy))


def _resolve_signature(wrapped: Callable[..., Any], func: Callable[..., Any]) -> None:
    """Give ``wrapped`` the signature of ``func`` with its annotations resolved where
    ``func`` was written. Django Ninja reads an operation's parameters from the function
    it is given and resolves string annotations (``from __future__ import annotations``)
    in that function's module: without this, in ours."""
    try:
        signature = inspect.signature(func, eval_str=True)
    except Exception:  # a name only imported for type checkers: nobody can resolve it
        return
    vars(wrapped)["__signature__"] = signature  # a function's attributes are its __dict__


def _wrap(func: Callable[..., Any], policy: Policy, *, built: bool = False) -> Callable[..., Any]:
    """``func`` under ``policy``; ``built``: the function of a Ninja operation already
    built, which :func:`idempotency.contrib.ninja.protect` wraps in place."""
    if isinstance(func, type):
        keyed_class = views.view_class(func, policy)  # DRF: IdempotentMixin mixed in
        if keyed_class is not None:
            return keyed_class
        raise ImproperlyApplied(
            f"@idempotent cannot decorate the class {func.__name__}: decorate its post()/put()/"
            "patch()/delete() methods (or use method_decorator), or use IdempotentMixin for DRF."
        )
    if getattr(func, "cls", None) is not None or getattr(func, "view_class", None) is not None:
        raise ImproperlyApplied(
            "@idempotent was applied to the result of as_view() or @api_view: it would run "
            "before authentication. Put @idempotent below @api_view, or decorate the view's "
            "methods, or use IdempotentMixin."
        )
    if not callable(func):
        raise ImproperlyApplied(f"@idempotent needs a view callable, got {func!r}")
    refuse_unwrappable(func, policy, built=built)
    declared = declared_non_response(func)

    if iscoroutinefunction(func):

        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            _view, request = split_view_args(args, decorator="@idempotent")
            if in_flow(request):
                return await func(*args, **kwargs)
            own = await views.arun(  # a Ninja operation's: its own response
                func, request, lambda: func(*args, **kwargs), policy, kwargs
            )
            if own is not None:
                return own
            refuse_non_response(func, declared)

            async def call() -> HttpResponseBase:
                return checked_response(func, await func(*args, **kwargs))

            return await handling.run_async(request, call, policy)

        wrapped: Callable[..., Any] = functools.wraps(func)(async_wrapper)
        markcoroutinefunction(wrapped)
    else:
        # decided once, not per request: only a ``dispatch`` can defer to its handler
        on_dispatch = getattr(func, "__name__", None) == "dispatch"

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            view, request = split_view_args(args, decorator="@idempotent")
            if on_dispatch:
                owner = _dispatch_owner(func, args)
                if owner is not None:  # on dispatch: the key is handled after its checks
                    defer_to_handler(owner, request, policy)
                    return func(*args, **kwargs)
            if in_flow(request):
                return func(*args, **kwargs)
            own = views.run(  # a Ninja operation's: its own response
                func, request, lambda: func(*args, **kwargs), policy, kwargs
            )
            if own is not None:
                return own
            refuse_non_response(func, declared)
            # a DRF view's own exception handling and rendering
            convert, finalize = views.answers(view, request) or (None, handling.identity)
            return handling.run(
                request,
                lambda: checked_response(func, func(*args, **kwargs)),
                policy,
                convert=convert,
                finalize=finalize,
            )

        wrapped = functools.wraps(func)(wrapper)
    setattr(wrapped, MARKER, policy)
    _resolve_signature(wrapped, func)
    views.mark(wrapped, func)  # Django Ninja: the hook it calls with the operation
    return wrapped


def policy_from(options: dict[str, Any], name: str = "idempotent") -> Policy:
    """The policy of ``@idempotent``'s keyword options (TypeError for an unknown one)."""
    unknown = set(options) - set(Policy.option_names())
    if unknown:
        raise TypeError(f"{name}() got unknown options: {', '.join(sorted(unknown))}")
    return Policy(**options)


def wrap_operation(func: Callable[..., Any], policy: Policy) -> Callable[..., Any]:
    """The function of a Ninja operation already built, under ``policy``."""
    return _wrap(func, policy, built=True)


@overload
def idempotent(view: F, /) -> F: ...
@overload
def idempotent(
    view: None = None,
    /,
    *,
    required: bool | None = None,
    ttl: float | None = None,
    lease: float | None = None,
    scope: Any = None,
    fingerprint: Callable[..., str] | None = None,
    store: Any = None,
    mode: str | None = None,
    wait: float | None = None,
    store_errors: bool | None = None,
    on_store_unavailable: str | None = None,
    claim: str | None = None,
    databases: list[str] | tuple[str, ...] | None = None,
    status_only: bool | None = None,
    redact: list[str] | tuple[str, ...] | None = None,
    max_new_records: int | None = None,
    record_window: float | None = None,
    error_ttl: float | None = None,
    on_replay: ReplayHook | None = None,
) -> Callable[[F], F]: ...
def idempotent(view: Any = None, /, **options: Any) -> Any:
    """Make a view honour the ``Idempotency-Key`` header.

    Use it bare (``@idempotent``) or with options (``@idempotent(required=True)``) on a
    function view, a method of a Django class-based view, a DRF ``APIView`` method, a
    viewset action, below ``@api_view``, or on a DRF view class (it then mixes in
    :class:`~idempotency.contrib.drf.mixins.IdempotentMixin`). Async views run in lease
    mode. Every option left out (or None) falls back to the view's class attributes, then to the
    ``IDEMPOTENCY`` setting of the same name.

    Args:
        required: Refuse an unsafe request without a key (400
            ``idempotency-key-required``) instead of running it unprotected.
        ttl: Seconds a completed record is kept and replayed (``TTL``).
        lease: Seconds a lease-mode claim is owned before a retry may take it over.
        scope: The scope keys are looked up in: a string, or ``scope(request)``
            returning a string or None (anonymous). Default: the caller's user.
        fingerprint: ``fingerprint(request, headers) -> str`` replacing the request
            fingerprint (``FINGERPRINT``).
        store: An alias of ``IDEMPOTENCY["STORES"]`` (default ``"default"``) or a store
            instance.
        mode: ``"atomic"``, ``"lease"`` or ``"auto"`` (``MODE``).
        wait: Seconds a duplicate waits for a first request still in progress before
            answering 409 (``WAIT``); it replays if the first completes in time.
        store_errors: Store 5xx and transient 4xx answers too, instead of releasing the
            key: at-most-once for effects the database cannot roll back.
        on_store_unavailable: ``"reject"`` (503 when the store cannot be reached, the
            view does not run) or ``"run"`` (run it without idempotency).
        claim: Atomic mode: ``"first"`` (claim before the view runs) or
            ``"optimistic"`` (insert the record after it) (``ATOMIC_CLAIM``).
        databases: Atomic mode: the database aliases wrapped in the view's transaction
            besides the store's database (``ATOMIC_DATABASES``).
        status_only: Store only the status and headers of the view's responses, never
            their bodies: a replay answers the status with an empty body (``STATUS_ONLY``).
        redact: JSON fields whose values are replaced by ``"[redacted]"`` before a body
            is stored, added to ``REDACT_FIELDS``; replays answer the redacted body.
        max_new_records: Most new records one caller (scope) may make per
            ``record_window`` seconds (``MAX_NEW_RECORDS``, ``RECORD_WINDOW``); one more
            is answered 429 ``idempotency-too-many-records``.
        record_window: Seconds of that window (``RECORD_WINDOW``).
        error_ttl: Seconds a definitive 4xx answer is kept instead of ``ttl``; 0: not
            stored (``ERROR_TTL``).
        on_replay: ``on_replay(request, response, record)``, called with each response
            replayed from a record before it is sent: it may add headers (an expiry
            from ``record.expires_at``, a trace id), never change the status or the
            body (``ON_REPLAY``).

    Returns:
        The wrapped view, or a decorator when called with options only.

    Raises:
        TypeError: For an unknown option.
        ValueError: For an option out of range (a negative ``ttl``, an unknown ``mode``).
        ImproperlyApplied: Where it cannot work: on the result of ``as_view()``,
            above ``@api_view``, on a Django ``View`` class, on a non-view callable.
    """
    policy = policy_from(options)
    if view is not None:
        if not callable(view):
            raise ImproperlyApplied(f"@idempotent needs a view callable, got {view!r}")
        return _wrap(view, policy)
    return lambda func: _wrap(func, policy)


def idempotency_exempt(view: F) -> F:
    """Leave this view alone in :class:`~idempotency.IdempotencyMiddleware`.

    Works on function views, async views and view classes; the view then runs as if
    the middleware were not installed, keys or not.
    """
    if inspect.isclass(view):
        view.idempotency_exempt = True
        return view
    if iscoroutinefunction(view):

        async def async_exempt(*args: Any, **kwargs: Any) -> Any:
            return await view(*args, **kwargs)

        wrapped: Any = functools.wraps(view)(async_exempt)
        markcoroutinefunction(wrapped)
    else:

        def exempt(*args: Any, **kwargs: Any) -> Any:
            return view(*args, **kwargs)

        wrapped = functools.wraps(view)(exempt)
    _resolve_signature(wrapped, view)
    wrapped.idempotency_exempt = True
    # functools.wraps gave it view's name, signature and attributes; the type system cannot
    # say that a new function has the type F of the one it wraps
    return wrapped  # type: ignore[no-any-return]
