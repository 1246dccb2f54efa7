"""``@idempotent_function``: run a plain callable at most once per key (the guide:
docs/howto/callbacks.md), and the keyed call it shares with Celery and Django tasks.

Every keyed call of a function or task takes one path: :class:`Callee` (what all calls
of one callable share: options, owner, result codec) runs a call's record address
(scope and key), its :class:`CallAnswers` (the engine's adapter, holding the arguments'
hash) and its body through the engine (:meth:`Callee.run`, :meth:`Callee.arun`). An
interface supplies only what differs: the scope and key, the arguments' hash, the body,
and how a task defers a run it cannot do now. A completed key returns its stored result
(a stored exception is raised again), a key in progress raises
:class:`~idempotency.exceptions.CallInProgress` (or is deferred), a key of another
callable or other arguments :class:`CallableMismatch` or :class:`ArgumentsMismatch`.

A record's fingerprint is 32 hex digits naming the function or task that owns the key
and 32 hashing its arguments (:func:`~idempotency.functions.arguments.call_fingerprint`).
A record stored before arguments were fingerprinted (the 64-digit name hash), or under
an older secret, is still that callable's own.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn, ParamSpec, Protocol, TypeGuard, TypeVar, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.core import engine
from idempotency.core.job import CallPolicy, Job, Outcome, ReplayedRecord
from idempotency.exceptions import (
    ArgumentsMismatch,
    CallableMismatch,
    CallInProgress,
    ImproperlyApplied,
    KeyPartMissing,
    StoreUnavailable,
)
from idempotency.functions.arguments import (
    Builder,
    CallArguments,
    FingerprintSpec,
    KeySpec,
    arguments_hasher,
    call_fingerprint,
    fingerprint_of,
    key_builder,
    older_call_fingerprints,
    qualified_name,
)
from idempotency.functions.results import (
    ResultCodec,
    Serializer,
    UnreadableResult,
    return_annotation,
    storable_error,
)
from idempotency.stores.base import AtomicStore, ClaimStatus, KeyState, unreadable_record

__all__ = ["Callee", "CallAnswers", "IdempotentCallable", "idempotent_function"]

logger = logging.getLogger("idempotency")

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

#: ``method`` recorded for the admin: which kind of caller claimed a record.
METHODS = {"function": "FUNCTION", "task": "TASK"}

#: ``defer(job, seconds, reason)``: a task's run that cannot run now (its key in progress
#: elsewhere, the store unreachable) runs again after ``seconds``; it never returns.
Defer = Callable[[Job, float, Exception], NoReturn]
ADefer = Callable[[Job, float, Exception], Awaitable[NoReturn]]


# -- the keyed call functions and tasks share ----------------------------------------------


@dataclass(frozen=True)
class Callee:
    """One idempotent function or task: what every keyed call of it shares."""

    policy: CallPolicy
    #: The function's or task's name: the record's route, the logs' owner, the fingerprint's.
    owner: str
    #: ``"function"`` or ``"task"``.
    interface: str
    codec: ResultCodec
    on_replay: Callable[[Any, ReplayedRecord], Any] | None = None

    def job(self, scope: str, key: str, answers: CallAnswers, *, asynchronous: bool = False) -> Job:
        """The job of one call under ``(scope, key)`` (an async call runs in lease mode)."""
        policy, store = self.policy, self.policy.get_store()
        atomic = not asynchronous and policy.runs_atomic(store)
        return Job(
            store=store,
            scope=scope,
            key=key,
            fingerprint=answers.fingerprint,
            mode="atomic" if atomic else "lease",
            lease=policy.get_lease(),
            ttl=policy.get_ttl(),
            wait=policy.get_wait(),
            method=METHODS[self.interface],
            route=self.owner,
            owner=self.owner,
            interface=self.interface,
            databases=policy.get_databases(store.using) if isinstance(store, AtomicStore) else [],
        )

    def run(
        self,
        scope: str,
        key: str,
        answers: CallAnswers,
        work: Callable[[], Any],
        defer: Defer | None = None,
    ) -> Any:
        """Run ``work`` under ``(scope, key)``; a task's run that cannot run now is deferred."""
        job = self.job(scope, key, answers)
        answers.defers = defer is not None
        try:
            return engine.run(job, answers, work)
        except Deferred as deferral:
            assert defer is not None
            defer(job, deferral.seconds, deferral.reason)
        except StoreUnavailable as exc:
            if job.started or defer is None:
                raise
            defer(job, exc.retry_after, exc)

    async def arun(
        self,
        scope: str,
        key: str,
        answers: CallAnswers,
        work: Callable[[], Awaitable[Any]],
        defer: ADefer | None = None,
    ) -> Any:
        """:meth:`run` for async work."""
        job = self.job(scope, key, answers, asynchronous=True)
        answers.defers = defer is not None
        try:
            return await engine.arun(job, answers, work)
        except Deferred as deferral:
            assert defer is not None
            await defer(job, deferral.seconds, deferral.reason)
        except StoreUnavailable as exc:
            if job.started or defer is None:
                raise
            await defer(job, exc.retry_after, exc)


class Deferred(Exception):  # noqa: N818 - control flow, never seen by callers
    """A task's run whose key is in progress elsewhere: :meth:`Callee.run` defers it (the
    adapter answers inside the engine's flow, where an async run cannot enqueue)."""

    def __init__(self, seconds: float, reason: Exception) -> None:
        super().__init__()
        self.seconds = seconds
        self.reason = reason


class CallAnswers:
    """The engine's adapter for one call of a function or task: ``hashed``, the hash of
    its arguments (None: they are not fingerprinted), or the ``fingerprint`` a task
    computes its own way."""

    def __init__(
        self, callee: Callee, hashed: bytes | None, fingerprint: str | None = None
    ) -> None:
        self.callee = callee
        #: The arguments' hash, for the fingerprints older secrets gave it (rotation)
        self.hashed = None if fingerprint else hashed
        self.fingerprint = fingerprint or call_fingerprint(callee.interface, callee.owner, hashed)
        self.store_errors = callee.policy.get_store_errors()
        #: A task's run in progress elsewhere is deferred (:class:`Deferred`), not refused
        self.defers = False
        #: The job and claim the body runs under (a Celery task's ``retry()`` releases it)
        self.job: Job | None = None
        self.claim: KeyState | None = None

    def adopts(self, job: Job, claim: KeyState) -> bool:
        """A MISMATCH that is this callable's own record after all: one stored under an
        older secret or unkeyed, or without the arguments' hash (or with it, where this
        call leaves arguments out). The call takes that record's fingerprint and claims
        again."""
        stored, legacy = claim.fingerprint, fingerprint_of(job.interface, job.owner)
        if not stored or stored == job.fingerprint:
            return False
        if self.hashed is not None and stored in older_call_fingerprints(
            job.interface, job.owner, self.hashed
        ):
            job.fingerprint = stored
            return True
        if stored[:32] != legacy[:32]:
            return False
        if stored == legacy or job.fingerprint == legacy:
            job.fingerprint = stored
            return True
        return False

    def replay(self, job: Job, claim: KeyState) -> Any:
        """The stored result of a completed key (a stored exception is raised)."""
        record = ReplayedRecord.of(job, claim)
        job.send(signals.replayed, record=record, expires_at=record.expires_at)
        level = logging.INFO if job.interface == "task" else logging.DEBUG
        logger.log(level, "idempotency: %s is a duplicate of key %s; replayed", job.owner, job.ref)
        try:
            result = self.callee.codec.decode(claim.response)
        except UnreadableResult as exc:
            # forged or damaged: never rebuilt into an undeclared class, never run again
            where = type(job.store).__name__
            raise unreadable_record(where, job.scope, job.key, str(exc)) from exc
        if self.callee.on_replay is not None:
            result = self.callee.on_replay(result, record)
        return result

    def refuse(self, job: Job, claim: KeyState) -> NoReturn:
        """Raise for a call that cannot run: in progress (a task defers), or a key
        mismatch."""
        if claim.status is not ClaimStatus.MISMATCH:
            busy = CallInProgress(job.scope, job.key)
            if self.defers:
                raise Deferred(claim.retry_after, busy)
            raise busy
        if claim.fingerprint and claim.fingerprint[:32] == job.fingerprint[:32]:
            raise ArgumentsMismatch(job.scope, job.key, job.owner)
        raise CallableMismatch(job.scope, job.key, job.owner)

    def over_quota(self, job: Job, retry_after: float) -> Any:  # pragma: no cover
        raise AssertionError("calls have no MAX_NEW_RECORDS")

    def bind(self, job: Job, claim: KeyState | None) -> None:
        self.job, self.claim = job, claim

    def keep(self, job: Job, result: Any) -> Outcome:
        """``result`` encoded for the record; the caller gets what a replay will return
        (an unstorable result raises, and the engine releases the key)."""
        stored = self.callee.codec.encode(result)
        return Outcome(stored, self.callee.codec.decode(stored), job.ttl)

    def failure(self, job: Job, exc: BaseException) -> Outcome | None:
        """Store the body's exception (``store_errors``) so repeats raise it too, or
        release the key (None)."""
        if self.store_errors and storable_error(exc):
            return Outcome(self.callee.codec.encode_error(exc), exc, job.ttl)
        return None

    async def akeep(self, job: Job, result: Any) -> Outcome:
        return self.keep(job, result)

    async def afailure(self, job: Job, exc: BaseException) -> Outcome | None:
        return self.failure(job, exc)


def built_key(
    build: Builder, arguments: CallArguments, *, optional: bool, owner: str
) -> str | None:
    """The call's key; None where a part is missing and the key is ``optional`` (the call
    then runs without idempotency, logged)."""
    try:
        return build(arguments)
    except KeyPartMissing as exc:
        if not optional:
            raise
        logger.warning("idempotency: %s runs without idempotency (optional key): %s", owner, exc)
        return None


def is_django_task(obj: object) -> bool:
    """Whether ``obj`` is a Django task (``@task`` of ``django.tasks``, or of the
    ``django-tasks`` backport), without importing either."""
    return any(
        cls.__module__ in ("django.tasks.base", "django_tasks.base") and cls.__name__ == "Task"
        for cls in type(obj).__mro__
    )


# -- the decorator -----------------------------------------------------------------------


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
        if mode == "atomic" and async_func is not None:
            raise ImproperlyApplied("Async functions cannot use atomic mode; use mode='lease'.")
        owner = qualified_name(func)
        build = key_builder(key, func, owner=owner)
        hasher = arguments_hasher(fingerprint, func, owner=owner)
        codec = ResultCodec(owner=owner, annotation=return_annotation(func), serializer=serializer)
        callee = Callee(policy, owner, "function", codec, on_replay)

        def keyed(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, CallAnswers] | None:
            """The call's key and adapter; None to run the body plainly."""
            if not idempotency_settings.ENABLED:
                return None
            arguments = CallArguments(args, kwargs)  # bound by name once, for both
            call_key = built_key(build, arguments, optional=optional, owner=owner)
            if call_key is None:
                return None
            return call_key, CallAnswers(callee, hasher(arguments) if hasher else None)

        wrapper: Any
        if async_func is not None:

            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                keyed_call = keyed(args, kwargs)
                if keyed_call is None:
                    return await async_func(*args, **kwargs)
                call_key, answers = keyed_call
                return await callee.arun(
                    scope, call_key, answers, lambda: async_func(*args, **kwargs)
                )

            wrapper = functools.wraps(func)(async_wrapper)
            markcoroutinefunction(wrapper)
        else:

            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                keyed_call = keyed(args, kwargs)
                if keyed_call is None:
                    return func(*args, **kwargs)
                call_key, answers = keyed_call
                return callee.run(scope, call_key, answers, lambda: func(*args, **kwargs))

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
