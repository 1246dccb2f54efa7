"""Find the protected views of a project and their policies, by walking its URL patterns.

The system checks use it to validate what each view configures for itself (a store
of its own, atomic mode) before the first request does; the OpenAPI schema shares
:func:`functions_of` to find ``@idempotent`` under ``@api_view``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from django.urls import URLPattern, URLResolver, get_resolver

from idempotency.http import frameworks
from idempotency.http.view_marks import policy_of

if TYPE_CHECKING:
    from idempotency.http.options import Policy

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
    own = frameworks.view_policies(callback)  # a Django Ninja path: its operations'
    if own is not None:
        yield from own
        return
    cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if not isinstance(cls, type):
        return
    actions = getattr(callback, "actions", None) or {}
    names = {*HANDLER_NAMES, *actions.values()}
    for name in sorted(names):
        yield from handler_policies(getattr(cls, name, None))
    class_policy = frameworks.class_policy(cls, callback)  # DRF: IdempotentMixin's
    if class_policy is not None:
        yield class_policy


def _patterns(patterns: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            namespace = f"{pattern.namespace}:" if pattern.namespace else ""
            yield from _patterns(pattern.url_patterns, prefix + namespace)
        elif isinstance(pattern, URLPattern):
            name = pattern.name or str(pattern.pattern)
            yield prefix + name, pattern.callback


def url_views(urlconf: Any = None) -> Iterator[tuple[str, Any]]:
    """``(view name, callback)`` of every URL pattern the URLconf reaches."""
    yield from _patterns(get_resolver(urlconf).url_patterns, "")


#: What the wrappers of Django's access decorators are called: ``login_required``,
#: ``permission_required`` and ``staff_member_required`` are all ``user_passes_test``.
_GATE = "user_passes_test."
#: What ``@idempotent``'s own wrappers are called (idempotency.http.decorators).
_IDEMPOTENT = "_wrap.<locals>."
GATE_NAME = "an access decorator (login_required, permission_required, user_passes_test)"


def _chain(func: Any) -> Iterator[Any]:
    """``func`` and the functions it wraps, outermost first (``__wrapped__``)."""
    seen: set[int] = set()
    while func is not None and id(func) not in seen:
        seen.add(id(func))
        yield func
        func = getattr(func, "__wrapped__", None)


def _qualname(func: Any) -> str:
    return str(getattr(getattr(func, "__code__", None), "co_qualname", ""))


def access_gate(view: Any) -> str | None:
    """The access check a view callable makes inside itself, where a replay from outside
    it would skip it (Django's access decorators), or None."""
    if any(_qualname(func).startswith(_GATE) for func in _chain(view)):
        return GATE_NAME
    return None


def gate_below_idempotent(view: Any) -> bool:
    """Whether ``@idempotent`` sits above an access decorator (``@idempotent`` then
    ``@login_required``): its replays would come before the check."""
    below = False
    for func in _chain(view):
        name = _qualname(func)
        if name.startswith(_IDEMPOTENT):
            below = True
        elif below and name.startswith(_GATE):
            return True
    return False


def protected_views(urlconf: Any = None) -> Iterator[tuple[str, Policy]]:
    """``(view name, policy)`` for every policy of every view the URLconf reaches."""
    for name, callback in url_views(urlconf):
        seen: set[int] = set()
        for policy in view_policies(callback):
            if id(policy) not in seen:
                seen.add(id(policy))
                yield name, policy
