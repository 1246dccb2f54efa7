"""``IdempotencyMiddleware``: ``Idempotency-Key`` on every unsafe request of a project, around
Django's own request handling (how it composes: docs/howto/middleware.md)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync, iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.db import connections, transaction
from django.http import HttpRequest, HttpResponseBase
from django.urls import get_resolver
from rest_framework.views import APIView

from idempotency.conf import idempotency_settings
from idempotency.http import flow, handling, ninja
from idempotency.http.keys import header_value
from idempotency.http.mixins import IdempotentMixin
from idempotency.http.policy import Policy
from idempotency.http.views import policy_of

logger = logging.getLogger("idempotency")

GetResponse = Callable[[HttpRequest], Any]


@dataclass(frozen=True)
class Plan:
    """How the middleware treats one view callable."""

    #: None: leave the view alone; else the policy of the wrapped request
    policy: Policy | None = None
    #: DRF views: the view class with IdempotentMixin mixed in, run from process_view
    drf_view: Callable[..., Any] | None = None
    is_async: bool = False


SKIP = Plan()


def _view_class(view_func: Any) -> Any:
    return getattr(view_func, "cls", None) or getattr(view_func, "view_class", None)


def _decorated(handler: Any) -> bool:
    """Whether ``handler`` is ``@idempotent``, or ``@api_view``'s handler around such a view."""
    if policy_of(handler) is not None:
        return True
    # @api_view sets a closure ``handler(self, *args, **kwargs): return func(...)`` as the
    # method: the function it calls is the one @idempotent may decorate
    cells = getattr(getattr(handler, "__func__", handler), "__closure__", None) or ()
    return any(policy_of(cell.cell_contents) is not None for cell in cells)


def _handles_keys_itself(view_func: Any, cls: Any, method: str) -> bool:
    if policy_of(view_func) is not None:
        return True
    if isinstance(cls, type):
        if issubclass(cls, IdempotentMixin):
            return True
        name = (getattr(view_func, "actions", None) or {}).get(method.lower(), method.lower())
        return _decorated(getattr(cls, name, None)) or _decorated(getattr(cls, "dispatch", None))
    return False


def _drf_view(cls: type[APIView], view_func: Any) -> Callable[..., Any]:
    non_atomic: set[str] = getattr(view_func, "_non_atomic_requests", set())
    attrs: dict[str, Any] = {"__module__": cls.__module__}
    if non_atomic and getattr(cls, "idempotency_mode", None) is None:
        attrs["idempotency_mode"] = "lease"  # the view asked for no transaction
    subclass: Any = type(cls.__name__, (IdempotentMixin, cls), attrs)
    initkwargs = getattr(view_func, "initkwargs", {}) or {}
    actions = getattr(view_func, "actions", None)
    view: Callable[..., Any]
    if actions is not None:
        view = subclass.as_view(actions, **initkwargs)
    else:
        view = subclass.as_view(**initkwargs)
    # Django decides ATOMIC_REQUESTS from the resolved view; we call the substitute, so
    # we apply the same rule (and the same non_atomic_requests opt-out) ourselves.
    for alias, settings_dict in connections.settings.items():
        if settings_dict["ATOMIC_REQUESTS"] and alias not in non_atomic:
            view = transaction.atomic(using=alias)(view)
    return view


def plan_for(view_func: Callable[..., Any], method: str) -> Plan:
    """Decide how the middleware treats ``view_func`` for an unsafe ``method``."""
    cls = _view_class(view_func)
    if getattr(view_func, "idempotency_exempt", False) or getattr(cls, "idempotency_exempt", False):
        return SKIP
    path_view = ninja.path_view_of(view_func)
    if path_view is not None:
        # Ninja authenticates inside the view: its operations take the key themselves,
        # after authentication (decorated ones with their own options)
        from idempotency.ninja import protect_operation

        for operation in path_view.operations:
            protect_operation(operation, Policy())
        return SKIP
    if _handles_keys_itself(view_func, cls, method):
        return SKIP
    if isinstance(cls, type) and issubclass(cls, APIView):
        return Plan(drf_view=_drf_view(cls, view_func))
    is_async = iscoroutinefunction(view_func)
    if is_async or getattr(view_func, "_non_atomic_requests", None):
        # a transaction cannot span an await, and a non_atomic_requests view asked for none
        return Plan(policy=Policy(mode="lease"), is_async=is_async)
    return Plan(policy=Policy())


class IdempotencyMiddleware:
    """Honour ``Idempotency-Key`` on every unsafe request (POST, PUT, PATCH, DELETE).

    List it after ``AuthenticationMiddleware`` (system check ``idempotency.E019``
    otherwise): the caller of a Django view is the user that middleware found. Views
    marked :func:`~idempotency.idempotency_exempt` are left alone, and views that
    handle keys themselves (``@idempotent``, :class:`~idempotency.IdempotentMixin`)
    keep their own policy. DRF views run with the mixin mixed in, so their keys are
    handled after DRF's authentication, permissions and throttles. The options are
    the ``IDEMPOTENCY`` settings. Django Ninja operations take their keys themselves,
    after Ninja's authentication (the middleware puts them under
    :func:`idempotency.ninja.protect`'s wrapping the first time it routes to them).
    Sync and async (WSGI and ASGI); it wraps the rest of
    the request, so ``ATOMIC_REQUESTS``, other middleware, template responses and
    streaming work as usual.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: GetResponse) -> None:
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

    def _resolve(self, request: HttpRequest) -> Plan:
        """The plan of the view this request will reach (resolved as Django will)."""
        if request.method not in flow.UNSAFE_METHODS:
            return SKIP
        try:
            match = get_resolver(getattr(request, "urlconf", None)).resolve(request.path_info)
        except Exception:  # Resolver404, or a URLconf error Django itself reports next
            return SKIP
        plan = self._plan(match.func, str(request.method))
        if plan.policy is None:
            return SKIP
        if header_value(request, idempotency_settings.HEADER) is None and not (
            plan.policy.get_required()
        ):
            return SKIP  # nothing to do: skip the flow (and, async, the thread hop)
        return plan

    # -- running ------------------------------------------------------------------------

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        plan = self._resolve(request)
        if plan.policy is None:
            return self.get_response(request)
        return self._run(request, plan.policy, self.get_response)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        plan = self._resolve(request)
        response: HttpResponseBase
        if plan.policy is None:
            response = await self.get_response(request)
        elif plan.is_async:
            get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]] = self.get_response
            response = await handling.run_async(request, lambda: get_response(request), plan.policy)
        else:
            # a sync view runs in a worker thread anyway: run the flow there too, so atomic
            # mode's transaction and the view share that thread's connection
            inner = async_to_sync(self.get_response)
            response = await sync_to_async(self._run)(request, plan.policy, inner)
        return response

    @staticmethod
    def _run(request: HttpRequest, policy: Policy, get_response: GetResponse) -> HttpResponseBase:
        response: HttpResponseBase = handling.run(request, lambda: get_response(request), policy)
        return response

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponseBase | None:
        if request.method not in flow.UNSAFE_METHODS:
            return None
        plan = self._plan(view_func, str(request.method))
        if plan.drf_view is None:
            return None  # not DRF: Django calls the view, inside the flow of __call__
        response: HttpResponseBase = plan.drf_view(request, *view_args, **view_kwargs)
        return response


__all__ = ["IdempotencyMiddleware", "plan_for"]
