"""``IdempotencyMiddleware``: ``Idempotency-Key`` on every unsafe request of a project, around
Django's own request handling (how it composes: docs/howto/middleware.md)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync, iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.middleware.csrf import CsrfViewMiddleware
from django.urls import ResolverMatch, get_resolver
from django.utils.module_loading import import_string
from django.views import View

from idempotency.conf import idempotency_settings
from idempotency.http import handler as handling
from idempotency.http import views
from idempotency.http.decorators import defer_to_handler
from idempotency.http.fingerprints import keep_body
from idempotency.http.options import Policy
from idempotency.http.requests import UNSAFE_METHODS, header_value
from idempotency.http.views import handler_policies, policy_of

logger = logging.getLogger("idempotency")


@dataclass(frozen=True)
class Plan:
    """How the middleware treats one view callable."""

    #: None: leave the view alone; else the policy of the wrapped request
    policy: Policy | None = None
    #: Class-based views: the view class with the key handled around its handler (DRF:
    #: IdempotentMixin mixed in; Django: defer_to_handler), run from process_view
    substitute: Callable[..., Any] | None = None
    is_async: bool = False


SKIP = Plan()


def _view_class(view_func: Any) -> Any:
    return getattr(view_func, "cls", None) or getattr(view_func, "view_class", None)


def _decorated(handler: Any) -> bool:
    """Whether ``handler`` is ``@idempotent``, or ``@api_view``'s handler around such a view."""
    return next(handler_policies(handler), None) is not None


def _handles_keys_itself(view_func: Any, cls: Any, method: str) -> bool:
    if policy_of(view_func) is not None:
        return True
    if isinstance(cls, type):
        if views.handles_keys(cls):
            return True
        name = (getattr(view_func, "actions", None) or {}).get(method.lower(), method.lower())
        return _decorated(getattr(cls, name, None)) or _decorated(getattr(cls, "dispatch", None))
    return False


if TYPE_CHECKING:
    #: What the class is mixed into, for the type checker: ``super()`` is a ``View``.
    _MixedInto = View
else:
    _MixedInto = object


class _HandledAfterDispatch(_MixedInto):
    """Mixed into a Django class-based view by the middleware: the key is handled around
    the handler ``dispatch`` calls, after the checks of the view's own ``dispatch``
    (``LoginRequiredMixin``, ``PermissionRequiredMixin``, ``UserPassesTestMixin``)."""

    idempotency_handler_policy: Policy

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        defer_to_handler(self, request, self.idempotency_handler_policy)
        return super().dispatch(request, *args, **kwargs)


def _is_plain_as_view(view_func: Any) -> bool:
    """Whether ``view_func`` is what Django's ``View.as_view()`` returned, undecorated (a
    decorator around it, such as ``login_required(...)``, must keep running)."""
    code = getattr(view_func, "__code__", None)
    return getattr(code, "co_qualname", "") == "View.as_view.<locals>.view"


def _django_view(cls: type[View], view_func: Any, policy: Policy) -> Callable[..., Any]:
    attrs = {"__module__": cls.__module__, "idempotency_handler_policy": policy}
    subclass: Any = type(cls.__name__, (_HandledAfterDispatch, cls), attrs)
    view = subclass.as_view(**(getattr(view_func, "view_initkwargs", None) or {}))
    return views.atomic_requests(view, view_func)


# -- access decorators, which a replay from outside the view would skip ---------------------

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


def gated_view(view_func: Callable[..., Any]) -> str | None:
    """The access check that makes the middleware leave ``view_func`` alone (a function
    view, or a decorated ``as_view()``, checking access inside itself), or None."""
    cls = _view_class(view_func)
    if getattr(view_func, "idempotency_exempt", False) or getattr(cls, "idempotency_exempt", False):
        return None
    if any(_handles_keys_itself(view_func, cls, m) for m in UNSAFE_METHODS):
        return None
    if isinstance(cls, type) and views.owns(cls):
        return None
    if isinstance(cls, type) and issubclass(cls, View) and _is_plain_as_view(view_func):
        return None
    return access_gate(view_func)


def plan_for(view_func: Callable[..., Any], method: str) -> Plan:
    """Decide how the middleware treats ``view_func`` for an unsafe ``method``."""
    cls = _view_class(view_func)
    if getattr(view_func, "idempotency_exempt", False) or getattr(cls, "idempotency_exempt", False):
        return SKIP
    if views.takes_own_keys(view_func):  # Django Ninja's operations, after its auth
        return SKIP
    if _handles_keys_itself(view_func, cls, method):
        return SKIP
    substitute = views.substitute(cls, view_func) if isinstance(cls, type) else None
    if substitute is not None:  # DRF: the view with IdempotentMixin mixed in
        return Plan(substitute=substitute)
    is_async = iscoroutinefunction(view_func)
    lease = is_async or getattr(view_func, "_non_atomic_requests", None)
    # a transaction cannot span an await, and a non_atomic_requests view asked for none
    policy = Policy(mode="lease") if lease else Policy()
    plain_class = isinstance(cls, type) and issubclass(cls, View) and _is_plain_as_view(view_func)
    if plain_class and not is_async:
        return Plan(substitute=_django_view(cls, view_func, policy))
    gate = access_gate(view_func)
    if gate is not None:
        # its access check runs inside the view: a replay from here would skip it
        logger.warning(
            "idempotency: IdempotencyMiddleware leaves %r alone: its access check (%s) runs "
            "inside it, and a replay would skip it (system check idempotency.E041). Put "
            "@idempotent below %s, or mark the view @idempotency_exempt.",
            view_func,
            gate,
            gate,
        )
        return SKIP
    return Plan(policy=policy, is_async=is_async)


_csrf_installed: dict[tuple[Any, ...], bool] = {}


def _csrf_protects() -> bool:
    """Whether MIDDLEWARE has Django's CsrfViewMiddleware (or a subclass)."""
    middleware = tuple(getattr(settings, "MIDDLEWARE", None) or ())
    found = _csrf_installed.get(middleware)
    if found is None:
        found = False
        for entry in middleware:
            try:
                cls = import_string(entry) if isinstance(entry, str) else entry
            except ImportError:
                continue
            if isinstance(cls, type) and issubclass(cls, CsrfViewMiddleware):
                found = True
                break
        _csrf_installed[middleware] = found
    return found


def csrf_refusal(request: HttpRequest, match: ResolverMatch) -> HttpResponseBase | None:
    """Django's CSRF check of a function view, before its key is looked up: a replay must
    not answer a request the view itself would refuse (403). Only where
    ``CsrfViewMiddleware`` is installed and the view is not ``csrf_exempt``; the check
    marks the request done, so the middleware's own pass later accepts it at once."""
    if getattr(match.func, "csrf_exempt", False) or not _csrf_protects():
        return None
    keep_body(request)  # the check may parse a form: the fingerprint reads the raw body

    def no_response(_request: HttpRequest) -> HttpResponseBase:  # pragma: no cover
        raise AssertionError("process_view never calls get_response")

    checker = CsrfViewMiddleware(no_response)
    refused: HttpResponseBase | None = checker.process_view(
        request, match.func, match.args, match.kwargs
    )
    return refused


class IdempotencyMiddleware:
    """Honour ``Idempotency-Key`` on every unsafe request (POST, PUT, PATCH, DELETE).

    List it after ``AuthenticationMiddleware`` (system check ``idempotency.E019``): the
    caller of a Django view is the user that middleware found. The options are the
    ``IDEMPOTENCY`` settings. Views marked :func:`~idempotency.idempotency_exempt` are left
    alone; views that handle keys themselves (``@idempotent``, ``IdempotentMixin``) keep
    their own policy. DRF views run with the mixin mixed in and Django Ninja operations
    take their keys themselves, so keys are handled after the framework's authentication.
    Sync and async; it wraps the rest of the request, so ``ATOMIC_REQUESTS``, other
    middleware, template responses and streaming work as usual.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
        self._plans: dict[tuple[Any, str], Plan] = {}

    # -- deciding -----------------------------------------------------------------------

    def _plan(self, view_func: Callable[..., Any], method: str) -> Plan:
        cache_key = (view_func, method)
        plan = self._plans.get(cache_key)
        if plan is None:
            try:
                plan = plan_for(view_func, method)
            except Exception:
                # a view the middleware cannot take part in runs untouched, never a 500
                logger.warning(
                    "idempotency: IdempotencyMiddleware cannot wrap %r; it runs without "
                    "idempotency (decorate it with @idempotent or @idempotency_exempt)",
                    view_func,
                    exc_info=True,
                )
                plan = SKIP
            self._plans[cache_key] = plan
        return plan

    def _resolve(self, request: HttpRequest) -> tuple[Plan, ResolverMatch | None]:
        """The plan of the view this request will reach (resolved as Django will)."""
        if request.method not in UNSAFE_METHODS:
            return SKIP, None
        try:
            match = get_resolver(getattr(request, "urlconf", None)).resolve(request.path_info)
        except Exception:  # Resolver404, or a URLconf error Django itself reports next
            return SKIP, None
        plan = self._plan(match.func, str(request.method))
        if plan.policy is None:
            return SKIP, None
        if header_value(request, idempotency_settings.HEADER) is None and not (
            plan.policy.get_required()
        ):
            return SKIP, None  # nothing to do: skip the flow (and, async, the thread hop)
        return plan, match

    # -- running ------------------------------------------------------------------------

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        plan, match = self._resolve(request)
        if plan.policy is None or match is None:
            return self.get_response(request)
        refused = csrf_refusal(request, match)
        if refused is not None:
            return refused
        return handling.run(request, lambda: self.get_response(request), plan.policy)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        plan, match = self._resolve(request)
        response: HttpResponseBase
        # an async middleware chain: what it was given answers with a coroutine
        get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]] = self.get_response
        if plan.policy is None or match is None:
            return await get_response(request)
        refused = None
        if not getattr(match.func, "csrf_exempt", False) and _csrf_protects():
            # the check may read the session: in a thread, never Django's one sync thread
            refused = await sync_to_async(csrf_refusal, thread_sensitive=False)(request, match)
        if refused is not None:
            return refused
        if plan.is_async:
            response = await handling.run_async(request, lambda: get_response(request), plan.policy)
        else:
            # a sync view runs in a worker thread anyway: run the flow there too, so atomic
            # mode's transaction and the view share that thread's connection
            inner = async_to_sync(self.get_response)
            run = sync_to_async(handling.run)
            response = await run(request, lambda: inner(request), plan.policy)
        return response

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponseBase | None:
        if request.method not in UNSAFE_METHODS:
            return None
        plan = self._plan(view_func, str(request.method))
        if plan.substitute is None:
            return None  # a function view: Django calls it, inside the flow of __call__
        response: HttpResponseBase = plan.substitute(request, *view_args, **view_kwargs)
        return response


__all__ = ["IdempotencyMiddleware", "plan_for"]
