"""DRF as a :class:`~idempotency.http.frameworks.Framework`: what ``@idempotent``, the
middleware, the fingerprints and the view discovery need of its views (registered by the
app's ``ready()``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connections, transaction
from rest_framework.request import Empty, Request
from rest_framework.views import APIView

from idempotency.contrib.drf.mixins import IdempotentMixin, hooks, view_of
from idempotency.http.answers import Convert, Finalize
from idempotency.http.frameworks import Framework
from idempotency.http.options import Policy


def _as_view(cls: type[APIView], view_func: Any) -> Callable[..., Any]:
    """``cls`` with :class:`IdempotentMixin` mixed in, built as ``view_func`` was (its
    viewset actions and init arguments), under the same ``ATOMIC_REQUESTS`` rule Django
    applies to the view it resolved (and its ``non_atomic_requests`` opt-out)."""
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
    for alias, settings_dict in connections.settings.items():
        if settings_dict["ATOMIC_REQUESTS"] and alias not in non_atomic:
            view = transaction.atomic(using=alias)(view)
    return view


class DjangoRestFramework(Framework):
    """DRF's views: ``Request`` objects, ``APIView`` classes (keys handled after DRF's
    ``initial()`` by :class:`IdempotentMixin`), its exception handling and rendering."""

    request_types = (Request,)

    def answers(self, view: Any, request: Any) -> tuple[Convert, Finalize] | None:
        if not isinstance(view, APIView):
            view = view_of(request)
        return None if view is None else hooks(view, request)

    def view_class(self, cls: type, policy: Policy) -> type | None:
        if not issubclass(cls, APIView):
            return None
        return type(
            cls.__name__,
            (IdempotentMixin, cls),
            {
                "idempotency_policy": policy,
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
                "__doc__": cls.__doc__,
            },
        )

    def handles_keys(self, cls: type) -> bool:
        return issubclass(cls, IdempotentMixin)

    def owns(self, cls: type) -> bool:
        return issubclass(cls, APIView)

    def substitute(self, cls: type, view_func: Any) -> Callable[..., Any] | None:
        return _as_view(cls, view_func) if issubclass(cls, APIView) else None

    def class_policy(self, cls: type, callback: Any) -> Policy | None:
        if not issubclass(cls, IdempotentMixin):
            return None
        try:
            view = cls(**(getattr(callback, "initkwargs", None) or {}))
            return view.get_idempotency_policy()
        except Exception:  # noqa: BLE001 - a view that cannot be built here is not ours
            return None

    def parsed_data(self, request: Any) -> tuple[Any, Any] | None:
        if isinstance(request, Request) and getattr(request, "_data", Empty) is not Empty:
            return request.data, request.FILES  # a DRF Request that parsed it
        return None


__all__ = ["DjangoRestFramework"]
