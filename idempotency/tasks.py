"""Idempotent Celery tasks: a redelivered or re-published message runs its work once
(``IdempotentTask``, ``idempotent_task``; the flow and the options: docs/howto/celery.md)."""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar, cast, overload

from celery import Celery, Task, shared_task

from idempotency.arguments import (
    CallArguments,
    FingerprintSpec,
    arguments_hasher,
    older_call_fingerprints,
)
from idempotency.beat import purge_expired_records_task, purge_expired_submit_tokens_task
from idempotency.calls import (
    KeyedCall,
    KeySpec,
    acquire,
    call_fingerprint,
    fail,
    fingerprint_of,
    finish,
    key_builder,
    replayed,
    store_failure,
)
from idempotency.conf import idempotency_settings
from idempotency.exceptions import IdempotencyKeyMissing, ImproperlyApplied, StoreUnavailable
from idempotency.keepalive import keep_call_alive
from idempotency.keyed import log_ref
from idempotency.policy import CallPolicy
from idempotency.redelivery import Redelivery
from idempotency.results import ResultCodec, return_annotation
from idempotency.stores.base import Claim, ClaimStatus

__all__ = [
    "IdempotentTask",
    "idempotent_task",
    "purge_expired_records_task",
    "purge_expired_submit_tokens_task",
]

logger = logging.getLogger("idempotency")

P = ParamSpec("P")
R = TypeVar("R")

#: ``method`` recorded for the admin: the record was claimed by a Celery task.
TASK_METHOD = "TASK"


@dataclass
class _Running:
    """The claim of the task running in this context (for :meth:`IdempotentTask.retry`)."""

    task: IdempotentTask
    call: KeyedCall
    claim: Claim
    released: bool = False

    def release(self, reason: BaseException | None) -> None:
        if not self.released:
            self.released = True
            self.call.release(self.claim, reason)

    def fail(self, reason: BaseException) -> None:
        if not self.released:
            self.released = True
            fail(self.call, self.claim, reason)


_running: contextvars.ContextVar[_Running | None] = contextvars.ContextVar(
    "idempotency_running_task", default=None
)


class IdempotentTask(Redelivery):
    """Celery task base class: a duplicate delivery of a key returns the stored result.

    The flow and the options: docs/howto/celery.md.
    """

    acks_late = True
    reject_on_worker_lost = True

    idempotency_key: KeySpec | None = None
    idempotency_scope: str = "tasks"
    idempotency_lease: float | None = None
    idempotency_ttl: float | None = None
    idempotency_wait: float = 0.0
    idempotency_store: Any = None
    idempotency_mode: str = "lease"
    idempotency_optional: bool = False
    idempotency_fingerprint: FingerprintSpec = None
    idempotency_serializer: Any = None
    idempotency_store_errors: bool = False
    idempotency_on_replay: Any = None

    # -- configuration hooks ---------------------------------------------------------

    def _option(self, name: str) -> Any:
        # read statically: a function stored as a class attribute must not become a method
        value = inspect.getattr_static(self, name, None)
        if isinstance(value, staticmethod | classmethod):
            value = value.__get__(self, type(self))
        return value

    def _derived(self, name: str, make: Callable[[], Any]) -> Any:
        """Built once per task from its options (key builder, hasher, codec)."""
        cache = self.__dict__.setdefault("_idempotency_derived", {})
        if name not in cache:
            cache[name] = make()
        return cache[name]

    def get_idempotency_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """The key of this delivery, or None to run it without idempotency."""
        spec = cast("KeySpec | None", self._option("idempotency_key"))
        if spec is None:
            task_id = self.request.id
            return None if self.request.called_directly or not task_id else str(task_id)
        builder = self._derived(
            "key", lambda: key_builder(spec, self.run, owner=f"task {self.name}")
        )
        try:
            return cast(str, builder(CallArguments(args, kwargs)))
        except IdempotencyKeyMissing as exc:
            if not self.idempotency_optional:
                raise
            logger.warning("idempotency: task %s runs without idempotency: %s", self.name, exc)
            return None

    def get_idempotency_fingerprint(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """This delivery's fingerprint: the task's name, and the keyed hash of its arguments."""
        return call_fingerprint("task", self.name, self._arguments_digest(args, kwargs))

    def _arguments_digest(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes | None:
        spec = self._option("idempotency_fingerprint")
        hasher = self._derived(
            "hasher", lambda: arguments_hasher(spec, self.run, owner=f"task {self.name}")
        )
        return None if hasher is None else hasher(CallArguments(args, kwargs))

    def _fingerprints(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[str, Callable[[], list[str]] | None]:
        """The fingerprint, and the older ones still accepted (unless a subclass
        fingerprints deliveries its own way)."""
        if type(self).get_idempotency_fingerprint is not IdempotentTask.get_idempotency_fingerprint:
            return self.get_idempotency_fingerprint(args, kwargs), None
        hashed = self._arguments_digest(args, kwargs)
        if hashed is None:
            return call_fingerprint("task", self.name, None), None
        older = functools.partial(older_call_fingerprints, "task", self.name, hashed)
        return call_fingerprint("task", self.name, hashed), older

    def get_idempotency_lease(self) -> float:
        if self.idempotency_lease is not None:
            return float(self.idempotency_lease)
        time_limit = self.time_limit or self.app.conf.task_time_limit
        if time_limit:
            return float(time_limit)
        return float(idempotency_settings.LEASE)

    def get_idempotency_policy(self) -> CallPolicy:
        """This task's options, resolved like a view's or a function's."""
        return CallPolicy(
            ttl=self.idempotency_ttl,
            lease=self.get_idempotency_lease(),
            wait=float(self.idempotency_wait or 0.0),
            store=self.idempotency_store,
            mode=self.idempotency_mode,
            store_errors=bool(self.idempotency_store_errors),
        )

    def idempotent_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> KeyedCall | None:
        if not idempotency_settings.ENABLED:
            return None
        key = self.get_idempotency_key(args, kwargs)
        if key is None:
            return None
        policy = self.get_idempotency_policy()
        store = policy.get_store()
        codec = self._derived(
            "codec",
            lambda: ResultCodec(
                owner=f"task {self.name}",
                annotation=return_annotation(self.run),
                serializer=self._option("idempotency_serializer"),
            ),
        )
        fingerprint, older = self._fingerprints(args, kwargs)
        return KeyedCall(
            store=store,
            scope=self.idempotency_scope,
            key=key,
            fingerprint=fingerprint,
            older=older,
            legacy=fingerprint_of("task", self.name),
            owner=self.name,
            lease=policy.get_lease(),
            ttl=policy.get_ttl(),
            wait=policy.get_wait(),
            method=TASK_METHOD,
            atomic=policy.runs_atomic(store),
            codec=codec,
            store_errors=policy.get_store_errors(),
            on_replay=self._option("idempotency_on_replay"),
        )

    # -- the flow --------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        call = self.idempotent_call(args, kwargs)
        if call is None:
            return super().__call__(*args, **kwargs)
        try:
            with call.store.atomic() if call.atomic else nullcontext():
                return self._run_keyed(call, args, kwargs)
        finally:
            store_failure(call)

    def _run_keyed(self, call: KeyedCall, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            claim = acquire(call)
        except StoreUnavailable as exc:
            self._retry_unavailable(call, exc, args, kwargs)
        if claim.status is ClaimStatus.COMPLETED:
            logger.info(
                "idempotency: task %s is a duplicate of key %s; acknowledged and skipped",
                self.name,
                log_ref(call.scope, call.key),
            )
            return replayed(call, claim)
        if claim.status is not ClaimStatus.CLAIMED:
            self._defer(call, claim, args, kwargs)
        running = _Running(self, call, claim)
        token = _running.set(running)
        try:
            with keep_call_alive(call, claim):
                result = super().__call__(*args, **kwargs)
        except BaseException as exc:
            running.fail(exc)
            raise
        finally:
            _running.reset(token)
        if running.released:
            # the body called self.retry() and swallowed its Retry: nothing to store
            return result
        return finish(call, claim, result)

    def retry(self, *args: Any, **kwargs: Any) -> Any:
        """Celery's retry, after releasing this delivery's key (so the retry can claim it).

        The key is freed *before* the retry message is published: a worker picking the
        retry up at once finds the key free instead of deferring it for a whole lease.
        """
        running = _running.get()
        if running is not None and running.task is self:
            running.release(None)
        return Task.retry(self, *args, **kwargs)


@overload
def idempotent_task(func: Callable[P, R], /) -> Task[P, R]: ...
@overload
def idempotent_task(
    func: None = None,
    /,
    *,
    app: Celery | None = None,
    key: KeySpec | None = None,
    scope: str = "tasks",
    ttl: float | None = None,
    lease: float | None = None,
    store: Any = None,
    wait: float = 0.0,
    mode: str = "lease",
    optional: bool = False,
    fingerprint: FingerprintSpec = None,
    serializer: Any = None,
    store_errors: bool = False,
    on_replay: Callable[..., Any] | None = None,
    **options: Any,
) -> Callable[[Callable[P, R]], Task[P, R]]: ...
def idempotent_task(
    func: Callable[..., Any] | None = None,
    /,
    *,
    app: Celery | None = None,
    key: KeySpec | None = None,
    scope: str = "tasks",
    ttl: float | None = None,
    lease: float | None = None,
    store: Any = None,
    wait: float = 0.0,
    mode: str = "lease",
    optional: bool = False,
    fingerprint: FingerprintSpec = None,
    serializer: Any = None,
    store_errors: bool = False,
    on_replay: Callable[..., Any] | None = None,
    **options: Any,
) -> Any:
    """Declare an idempotent Celery task: ``app.task`` (or ``shared_task``) with
    ``base=IdempotentTask``.

    ``key``, ``scope``, ``ttl``, ``lease``, ``store``, ``wait``, ``mode``, ``optional``,
    ``fingerprint``, ``serializer``, ``store_errors`` and ``on_replay`` set the
    ``idempotency_*`` options of :class:`IdempotentTask` (each as for
    :func:`~idempotency.functions.idempotent_function`); every other keyword
    (``bind``, ``name``, ``autoretry_for``, ``max_retries``, ``acks_late`` …) goes
    to Celery unchanged. ``base`` may name a subclass of :class:`IdempotentTask`.
    Usable bare (``@idempotent_task``) or called.
    """
    base = options.pop("base", IdempotentTask)
    if not (isinstance(base, type) and issubclass(base, IdempotentTask)):
        raise ImproperlyApplied(
            f"idempotent_task(base=...) must be a subclass of IdempotentTask, got {base!r}"
        )
    if key is not None and not (isinstance(key, str) or callable(key)):
        raise TypeError(f"key must be a format string or a callable, got {key!r}")
    CallPolicy(ttl=ttl, lease=lease, wait=wait, store=store, mode=mode)  # validated once
    attributes: dict[str, Any] = {
        "base": base,
        # a staticmethod, so a key function never becomes a method of the task class
        "idempotency_key": staticmethod(key) if callable(key) else key,
        "idempotency_scope": scope,
        "idempotency_ttl": ttl,
        "idempotency_lease": lease,
        "idempotency_store": store,
        "idempotency_wait": wait,
        "idempotency_mode": mode,
        "idempotency_optional": optional,
        # staticmethods too: a function option never becomes a method of the task class
        "idempotency_fingerprint": staticmethod(fingerprint)
        if callable(fingerprint)
        else fingerprint,
        "idempotency_serializer": serializer,
        "idempotency_store_errors": store_errors,
        "idempotency_on_replay": staticmethod(on_replay) if on_replay is not None else None,
    }
    decorator: Any = (app.task if app is not None else shared_task)(**attributes, **options)
    if func is not None:
        return decorator(func)
    return decorator
