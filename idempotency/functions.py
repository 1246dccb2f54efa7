"""``@idempotent_function``: run a plain callable at most once per key.

For work that does not arrive as an HTTP request with an ``Idempotency-Key``:
payment-gateway callbacks, message handlers, management scripts run twice::

    from idempotency import idempotent_function

    @idempotent_function(key="pay_callback:{trade_no}")
    def handle_payment_callback(trade_no: str, amount: str) -> dict[str, str]:
        ...  # charge, ship, e-mail: runs once per trade_no
        return {"status": "paid"}

The flow is the keyed-call engine (:mod:`idempotency.calls`, shared with Celery
tasks) over the store contract (:mod:`idempotency.stores.base`):

1. the key is built from the call's arguments (a format string formatted with
   the bound arguments, defaults applied, or a callable of the arguments);
2. the key is **claimed** in ``scope`` with a lease and a fencing token. The
   record's fingerprint is the SHA-256 of the function's qualified name, so the
   same key claimed by two different functions raises
   :class:`FunctionKeyMismatch` instead of silently returning the other
   function's result;
3. the key is already **completed**: the stored result is returned, the body
   does not run. Results are stored as JSON, so falsy results (``0``,
   ``False``, ``{}``, ``[]``, ``None``) are replayed like any other;
4. the key is **in progress** elsewhere: wait up to ``wait`` seconds for it to
   finish (then return its result), else raise
   :class:`~idempotency.exceptions.InProgress`. A lease that ran out (the owner
   crashed) is taken over;
5. the key is **claimed**: the body runs. An exception releases the key (a later
   call runs again) and propagates; a result is JSON-encoded and stored with the
   fencing token. A result that is not JSON-serialisable releases the key and
   raises :class:`TypeError` before anything is stored. An owner whose lease was
   taken over cannot overwrite the new owner's result: its completion is
   refused and logged as a warning (signal ``stale_owner``).

**The first call returns what every repeat returns**: the result after a JSON
round trip (a tuple comes back as a list, dict keys as strings). A caller can
never depend on something only the first call would give it.

Sync and async callables both work; an async one runs the store calls through
:func:`asgiref.sync.sync_to_async` and waits with :func:`asyncio.sleep`.

Inside ``transaction.atomic()`` the claim is part of the caller's transaction:
other processes cannot see it before the commit (a concurrent duplicate waits on
the database's unique index instead) and a rollback takes it back.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async

from idempotency.calls import (
    FunctionKeyMismatch,
    KeyedCall,
    KeySpec,
    aacquire,
    acquire,
    fingerprint_of,
    finish,
    key_builder,
    qualified_name,
    replayed,
    runs_atomic,
    transaction_for,
)
from idempotency.conf import MODES, idempotency_settings
from idempotency.exceptions import ImproperlyApplied
from idempotency.stores import get_store
from idempotency.stores.base import ClaimStatus

__all__ = [
    "FunctionKeyMismatch",
    "IdempotentCallable",
    "idempotent_function",
]

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class IdempotentCallable(Protocol[P, R_co]):
    """What :func:`idempotent_function` returns: the callable plus its key helpers."""

    idempotency_scope: str

    @property
    def __wrapped__(self) -> Callable[P, R_co]: ...

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def key_for(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """The idempotency key of a call with these arguments."""
        ...

    def forget(self, *args: P.args, **kwargs: P.kwargs) -> bool:
        """Delete the record of a call with these arguments, so it runs again."""
        ...

    async def aforget(self, *args: P.args, **kwargs: P.kwargs) -> bool:
        """:meth:`forget` for async code."""
        ...


# -- the decorator -----------------------------------------------------------------------


def idempotent_function(
    *,
    key: KeySpec,
    scope: str = "functions",
    ttl: float | None = None,
    lease: float | None = None,
    store: Any = None,
    wait: float | None = None,
    mode: str = "lease",
) -> Callable[[Callable[P, R]], IdempotentCallable[P, R]]:
    """Make a callable run at most once per key; repeats return the stored result.

    ``key``
        A format string formatted with the call's bound arguments (defaults applied;
        attribute and index access work: ``"refund:{order.pk}"``), or a callable
        receiving the same arguments as the function and returning the key. Keys are
        1 to 255 characters. Name the operation in them (``"pay_callback:{trade_no}"``,
        ``"msg_{message_id}_{consumer}"``); never a timestamp or a bare user id.
    ``scope``
        Namespace of the keys (default ``"functions"``); a key is unique per scope.
    ``ttl``
        Seconds a result is kept and returned to repeats (default: the ``TTL`` setting).
    ``lease``
        Seconds a claim is owned before a repeat may take it over, for when the owner
        crashed (default: the ``LEASE`` setting). Keep it above the longest run time.
    ``store``
        A store instance, class or dotted path (default: the ``STORE`` setting).
    ``wait``
        Seconds a repeat waits for a running first call before raising
        :class:`~idempotency.exceptions.InProgress` (default: the ``WAIT`` setting).
    ``mode``
        ``"lease"`` (the default: claim, run, complete), ``"atomic"`` (with
        :class:`~idempotency.stores.DatabaseStore`: the claim, the function's database
        writes and the stored result commit in one transaction, so a crash leaves none of
        them and a concurrent repeat waits on the record's unique index, then returns the
        committed result), or ``"auto"`` (atomic where the store supports it, else lease).
        Atomic mode is for functions whose effects all live in the database; sync only.

    The wrapper has ``key_for(*args, **kwargs)`` (the key of a call) and
    ``forget(*args, **kwargs)`` / ``aforget`` (delete that record so it runs again).
    Raises :class:`FunctionKeyMismatch` when the key belongs to another function.
    """
    if callable(key) and isinstance(key, type):
        raise TypeError("key must be a format string or a function of the arguments")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")

    def decorate(func: Callable[P, R]) -> IdempotentCallable[P, R]:
        if not callable(func):
            raise TypeError(f"@idempotent_function decorates callables, got {func!r}")
        if mode == "atomic" and iscoroutinefunction(func):
            raise ImproperlyApplied("Async functions cannot use atomic mode; use mode='lease'.")
        async_func_given = iscoroutinefunction(func)
        owner = qualified_name(func)
        build = key_builder(key, func, owner=owner)
        fingerprint = fingerprint_of("function", owner)

        def keyed(args: tuple[Any, ...], kwargs: dict[str, Any]) -> KeyedCall:
            settings = idempotency_settings
            resolved = get_store(store)
            return KeyedCall(
                store=resolved,
                scope=scope,
                key=build(args, kwargs),
                fingerprint=fingerprint,
                owner=owner,
                lease=float(settings.LEASE if lease is None else lease),
                ttl=float(settings.TTL if ttl is None else ttl),
                wait=float(settings.WAIT if wait is None else wait),
                atomic=mode != "lease" and not async_func_given and runs_atomic(resolved, mode),
            )

        wrapper: Any
        if iscoroutinefunction(func):
            async_func = cast(Callable[..., Awaitable[Any]], func)

            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                call = keyed(args, kwargs)
                claim = await aacquire(call)
                if claim.status is ClaimStatus.COMPLETED:
                    return replayed(call, claim)
                if claim.status is not ClaimStatus.CLAIMED:
                    raise call.in_progress()
                try:
                    result = await async_func(*args, **kwargs)
                except BaseException as exc:
                    await sync_to_async(call.release)(claim, exc)
                    raise
                return await sync_to_async(finish)(call, claim, result)

            wrapper = functools.wraps(func)(async_wrapper)
            markcoroutinefunction(wrapper)
        else:

            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                call = keyed(args, kwargs)
                with transaction_for(call.store, mode):
                    claim = acquire(call)
                    if claim.status is ClaimStatus.COMPLETED:
                        return replayed(call, claim)
                    if claim.status is not ClaimStatus.CLAIMED:
                        raise call.in_progress()
                    try:
                        result = func(*args, **kwargs)
                    except BaseException as exc:
                        call.release(claim, exc)
                        raise
                    return finish(call, claim, result)

            wrapper = functools.wraps(func)(sync_wrapper)

        def key_for(*args: Any, **kwargs: Any) -> str:
            return build(args, kwargs)

        def forget(*args: Any, **kwargs: Any) -> bool:
            return get_store(store).delete(scope, build(args, kwargs))

        async def aforget(*args: Any, **kwargs: Any) -> bool:
            return await sync_to_async(forget)(*args, **kwargs)

        wrapper.key_for = key_for
        wrapper.forget = forget
        wrapper.aforget = aforget
        wrapper.idempotency_scope = scope
        return cast("IdempotentCallable[P, R]", wrapper)

    return decorate
