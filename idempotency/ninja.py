"""Django Ninja: one option for a whole router or API (``[ninja]`` extra).

``@idempotent`` works on a single operation (directly below ``@api.post(...)``);
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

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from idempotency.exceptions import ImproperlyApplied
from idempotency.http import ninja as glue
from idempotency.http.decorators import policy_from, wrap_operation
from idempotency.http.options import Policy
from idempotency.http.requests import UNSAFE_METHODS
from idempotency.http.view_marks import policy_of

T = TypeVar("T")

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
    glue.contribute(operation)


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
            from django.utils.module_loading import import_string

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
    from ninja import NinjaAPI, Router

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


__all__ = ["protect"]
