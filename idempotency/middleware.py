"""``IdempotencyMiddleware``: opt in every unsafe request of a project at once.

Put it last in ``MIDDLEWARE`` (after authentication). For DRF views it mixes
:class:`~idempotency.mixins.IdempotentMixin` into the view class, so the key
is still handled after DRF's authentication and permissions; for other views
it wraps the view like ``@idempotent``. Views marked ``@idempotency_exempt``
and views that handle keys themselves are left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from rest_framework.views import APIView

from idempotency import handling
from idempotency.decorators import idempotent, policy_of
from idempotency.mixins import IdempotentMixin


class IdempotencyMiddleware:
    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        self._views: dict[Any, Callable[..., HttpResponseBase]] = {}

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return self.get_response(request)

    def _idempotent_view(self, view_func: Callable[..., Any]) -> Callable[..., Any] | None:
        cached = self._views.get(view_func)
        if cached is not None:
            return cached
        cls = getattr(view_func, "cls", None)
        if getattr(view_func, "idempotency_exempt", False) or getattr(
            cls, "idempotency_exempt", False
        ):
            return None
        if isinstance(cls, type) and issubclass(cls, APIView):
            if issubclass(cls, IdempotentMixin):
                return None
            subclass: Any = type(
                cls.__name__, (IdempotentMixin, cls), {"__module__": cls.__module__}
            )
            initkwargs = getattr(view_func, "initkwargs", {}) or {}
            actions = getattr(view_func, "actions", None)
            if actions is not None:
                wrapped: Callable[..., Any] = subclass.as_view(actions, **initkwargs)
            else:
                wrapped = subclass.as_view(**initkwargs)
        elif policy_of(view_func) is not None:
            return None
        else:
            wrapped = idempotent(view_func)
        self._views[view_func] = wrapped
        return wrapped

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponseBase | None:
        if request.method not in handling.UNSAFE_METHODS:
            return None
        wrapped = self._idempotent_view(view_func)
        if wrapped is None:
            return None
        response: HttpResponseBase = wrapped(request, *view_args, **view_kwargs)
        return response


__all__ = ["IdempotencyMiddleware"]
