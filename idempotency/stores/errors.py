"""How a store's failures become the library's errors.

:func:`store_operation` decorates a store method of ``(scope, key, ...)``: a value that
is not a record raises :class:`~idempotency.exceptions.StoreCorrupted`
(:func:`corrupted`, :func:`unreadable_record`), an outage of the backend
:class:`~idempotency.exceptions.StoreUnavailable`
(``idempotency.core.outages.outage_raises_unavailable`` does only the latter).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from idempotency.core.outages import is_outage, unavailable, wrap_errors

logger = logging.getLogger("idempotency")

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")  # the store


def _unreadable(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a value under a record's key that is not a record: Redis'
    WRONGTYPE (a string where a hash should be), or fields that do not parse."""
    if type(exc).__name__ == "ResponseError":  # redis-py, not imported here
        return "WRONGTYPE" in str(exc)
    return isinstance(exc, ValueError | TypeError | KeyError | IndexError)


def corrupted(store: object, scope: str, key: str, exc: Exception) -> Exception | None:
    """The :class:`~idempotency.exceptions.StoreCorrupted` to raise for ``exc`` (logged
    with the record's hashed name) when it comes from a value under the record's key
    that is not a record; None for any other error."""
    # imported here, on the error path: not on every store call
    from idempotency.exceptions import IdempotencyError

    if isinstance(exc, IdempotencyError) or not _unreadable(exc):
        return None
    return unreadable_record(type(store).__name__, scope, key, f"{type(exc).__name__}: {exc}")


def unreadable_record(where: str, scope: str, key: str, reason: str) -> Exception:
    """A :class:`~idempotency.exceptions.StoreCorrupted` for the record of ``(scope,
    key)``, logged as an error under its hashed name
    (:func:`idempotency.core.keyed_hashes.log_ref`): logs never carry a raw key or scope."""
    from idempotency.core.keyed_hashes import log_ref
    from idempotency.exceptions import StoreCorrupted

    ref = log_ref(scope, key)
    logger.error(
        "idempotency: the record %s in %s is unreadable (%s); nothing ran. Delete the "
        "value under its key, or give the store another key_prefix.",
        ref,
        where,
        reason,
    )
    return StoreCorrupted(
        f"The idempotency record {ref} is unreadable, so nothing was run.",
        scope=scope,
        key=key,
    )


def store_operation(
    backend: str,
) -> Callable[[Callable[Concatenate[S, str, str, P], R]], Callable[Concatenate[S, str, str, P], R]]:
    """Decorate a store method of ``(scope, key, ...)``, sync or ``async``: a value under
    the record's key that is not a record raises
    :class:`~idempotency.exceptions.StoreCorrupted` (logged with the key; the caller's
    work does not run), an outage of ``backend``
    :class:`~idempotency.exceptions.StoreUnavailable` as
    ``idempotency.core.outages.outage_raises_unavailable`` raises it, anything else
    passes through. One wrapper for both: every claim and completion goes through it."""

    def decorate(
        method: Callable[Concatenate[S, str, str, P], R],
    ) -> Callable[Concatenate[S, str, str, P], R]:
        operation = method.__name__

        def problem(self: S, args: tuple[Any, ...], exc: Exception) -> Exception | None:
            scope, key = str(args[0]), str(args[1])
            found = corrupted(self, scope, key, exc)
            if found is None and is_outage(exc):
                found = unavailable(
                    backend, operation, exc, sender=type(self), scope=scope, key=key
                )
            return found

        return wrap_errors(method, problem)

    return decorate
