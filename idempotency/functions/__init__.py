"""``@idempotent_function``: keyed calls of plain callables, the keys and fingerprints of their
arguments, and how their results are stored."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# name -> the module that defines it, imported on first use (as idempotency's own
# names are): importing a sibling module never imports this one's code
_EXPORTS: dict[str, str] = {
    "IdempotentCallable": "idempotency.functions.decorator",
    "idempotent_function": "idempotency.functions.decorator",
}

__all__ = ["IdempotentCallable", "idempotent_function"]


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module_name), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover - static re-exports for type checkers
    from idempotency.functions.decorator import IdempotentCallable as IdempotentCallable
    from idempotency.functions.decorator import idempotent_function as idempotent_function
