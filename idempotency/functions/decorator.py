"""``@idempotent_function``: run a plain callable at most once per key (the engine of
:mod:`idempotency.core.engine`, with the keyed calls of :mod:`idempotency.functions.calls`; the
guide: docs/howto/callbacks.md)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol, TypeGuard, TypeVar, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from idempotency.conf import idempotency_settings
from idempotency.core import engine
from idempotency.core.job import CallPolicy, Job, ReplayedRecord
from idempotency.exceptions import ImproperlyApplied, KeyPartMissing
from idempotency.functions.arguments import (
    CallArguments,
    FingerprintSpec,
    arguments_hasher,
    key_builder,
    older_call_fingerprints,
    qualified_name,
)
from idempotency.functions.calls import (
    ArgumentsMismatch,
    CallableMismatch,
    CallAnswers,
    KeySpec,
    call_fingerprint,
    call_job,
    fingerprint_of,
)
from idempotency.functions.results import ResultCodec, Serializer, return_annotation

__all__ = [
    "ArgumentsMismatch",
    "CallableMismatch",
    "IdempotentCallable",
    "idempotent_function",
]

logger = logging.getLogger("idempotency")

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


def _is_async(func: Callable[P, object]) -> TypeGuard[Callable[P, Awaitable[Any]]]:
    """``func`` is a coroutine function (or marked as one): a call returns an awaitable."""
    return iscoroutinefunction(func)


def is_django_task(obj: object) -> bool:
    """Whether ``obj`` is a Django task (``@task`` of ``django.tasks``, or of the
    ``django-tasks`` backport), without importing either."""
    return any(
        cls.__module__ in ("django.tasks.base", "django_tasks.base") and cls.__name__ == "Task"
        for cls in type(obj).__mro__
    )


def unkeyed(owner: str, exc: KeyPartMissing) -> None:
    logger.warning("idempotency: %s runs without idempotency (optional key): %s", owner, exc)


# -- the decorator -----------------------------------------------------------------------


def idempotent_function(
    *,
    key: KeySpec,
    scope: str = "functions",
    ttl: float | None = None,
    lease: float | None = None,
    store: Any = None,
    wait: float | None = None,
    mode: str | None = None,
    optional: bool = False,
    fingerprint: FingerprintSpec = None,
    serializer: Serializer | None = None,
    store_errors: bool | None = None,
    on_replay: Callable[[Any, ReplayedRecord], Any] | None = None,
) -> Callable[[Callable[P, R]], IdempotentCallable[P, R]]:
    """Make a callable run at most once per key; repeats return the stored result.

    ``key``
        A format string formatted with the call's bound arguments (defaults applied;
        attribute and index access work: ``"refund:{order.pk}"``), a callable
        receiving the same arguments as the function and returning the key, or
        :func:`~idempotency.functions.arguments.payload_key`. Keys are 1 to 255 characters. Name
        the operation in them (``"pay_callback:{trade_no}"``); never a timestamp or a
        bare user id. A part that is None or empty raises
        :class:`~idempotency.exceptions.KeyPartMissing` (a ``ValueError``).
    ``scope``
        Namespace of the keys (default ``"functions"``); a key is unique per scope.
    ``ttl``
        Seconds a result is kept and returned to repeats (default: the ``TTL`` setting).
    ``lease``
        Seconds a claim is owned before a repeat may take it over (default: the
        ``LEASE`` setting). A running body's lease is kept alive, so it only runs out
        when the owner died.
    ``store``
        An alias of ``IDEMPOTENCY["STORES"]`` (default ``"default"``) or a store instance.
    ``wait``
        Seconds a repeat waits for a running first call before raising
        :class:`~idempotency.exceptions.CallInProgress` (default: the ``WAIT`` setting).
    ``mode``
        ``"lease"`` (claim, run, complete), ``"atomic"`` (with
        :class:`~idempotency.stores.database.DatabaseStore`: the claim, the function's database
        writes and the stored result commit in one transaction, so a crash leaves none of
        them and a concurrent repeat waits on the record's unique index, then returns the
        committed result), or ``"auto"`` (atomic where the store supports it, else lease);
        default: the ``MODE`` setting (``"auto"``). Async functions run in lease mode.
    ``optional``
        A key part that is None or empty runs the call without idempotency (logged as a
        warning) instead of raising.
    ``fingerprint``
        What a repeat must match (else :class:`ArgumentsMismatch`): every bound argument
        (None, the default), the named ones (``["order_id", "amount"]``), what a callable
        of the arguments returns, or nothing (``False``).
    ``serializer``
        An object with ``dumps(value)`` and ``loads(data)`` storing the result instead of
        the typed JSON of :mod:`idempotency.functions.results`.
    ``store_errors``
        Store an exception of the body too: repeats raise it again instead of running
        (default: the ``STORE_ERRORS`` setting).
    ``on_replay``
        ``on_replay(result, record)`` is called on each replay with the stored result and
        a :class:`~idempotency.core.job.ReplayedRecord` (scope, key, expiry); its return
        value is what the call returns.

    The wrapper has ``key_for(*args, **kwargs)`` (the key of a call) and
    ``forget(*args, **kwargs)`` / ``aforget`` (delete that record so it runs again).
    """
    if callable(key) and isinstance(key, type):
        raise TypeError("key must be a format string or a function of the arguments")
    policy = CallPolicy(
        ttl=ttl, lease=lease, wait=wait, store=store, mode=mode, store_errors=store_errors
    )

    def decorate(func: Callable[P, R]) -> IdempotentCallable[P, R]:
        if is_django_task(func):
            raise TypeError(
                f"@idempotent_function decorates callables, got the Django task {func!r}: "
                "use @idempotent_django_task (from idempotency) for Django tasks, over or "
                "under @task"
            )
        if not callable(func):
            raise TypeError(f"@idempotent_function decorates callables, got {func!r}")
        async_func = func if _is_async(func) else None
        async_func_given = async_func is not None
        if mode == "atomic" and async_func_given:
            raise ImproperlyApplied("Async functions cannot use atomic mode; use mode='lease'.")
        owner = qualified_name(func)
        build = key_builder(key, func, owner=owner)
        hasher = arguments_hasher(fingerprint, func, owner=owner)
        legacy = fingerprint_of("function", owner)
        codec = ResultCodec(owner=owner, annotation=return_annotation(func), serializer=serializer)

        def keyed(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Job, CallAnswers] | None:
            """The call's job and adapter; None to run the body plainly."""
            if not idempotency_settings.ENABLED:
                return None
            arguments = CallArguments(args, kwargs)  # bound by name once, for both
            try:
                call_key = build(arguments)
            except KeyPartMissing as exc:
                if not optional:
                    raise
                unkeyed(owner, exc)
                return None
            hashed = hasher(arguments) if hasher is not None else None
            job = call_job(
                policy,
                scope=scope,
                key=call_key,
                fingerprint=call_fingerprint("function", owner, hashed),
                owner=owner,
                interface="function",
                asynchronous=async_func_given,
            )
            older = (
                None
                if hashed is None
                else functools.partial(older_call_fingerprints, "function", owner, hashed)
            )
            return job, CallAnswers(codec, policy.get_store_errors(), on_replay, legacy, older)

        wrapper: Any
        if async_func is not None:

            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                keyed_call = keyed(args, kwargs)
                if keyed_call is None:
                    return await async_func(*args, **kwargs)
                job, adapter = keyed_call
                return await engine.arun(job, adapter, lambda: async_func(*args, **kwargs))

            wrapper = functools.wraps(func)(async_wrapper)
            markcoroutinefunction(wrapper)
        else:

            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                keyed_call = keyed(args, kwargs)
                if keyed_call is None:
                    return func(*args, **kwargs)
                job, adapter = keyed_call
                return engine.run(job, adapter, lambda: func(*args, **kwargs))

            wrapper = functools.wraps(func)(sync_wrapper)

        def key_for(*args: Any, **kwargs: Any) -> str:
            return build(CallArguments(args, kwargs))

        def forget(*args: Any, **kwargs: Any) -> bool:
            return policy.get_store().delete(scope, build(CallArguments(args, kwargs)))

        async def aforget(*args: Any, **kwargs: Any) -> bool:
            return await policy.get_store().adelete(scope, build(CallArguments(args, kwargs)))

        wrapper.key_for = key_for
        wrapper.forget = forget
        wrapper.aforget = aforget
        wrapper.idempotency_scope = scope
        # the wrapper has its key helpers now, set above: no type says so before they are
        return cast("IdempotentCallable[P, R]", wrapper)

    return decorate
