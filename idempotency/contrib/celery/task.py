"""Idempotent Celery tasks: a redelivered or re-published message runs its work once
(``IdempotentTask``, ``idempotent_task``; the flow and the options: docs/howto/celery.md)."""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar, overload

from celery import Celery, Task, shared_task

from idempotency.conf import idempotency_settings
from idempotency.contrib.celery.periodic import (
    purge_expired_records_task,
    purge_expired_submit_tokens_task,
)
from idempotency.contrib.celery.redelivery import Redelivery
from idempotency.core import engine
from idempotency.core.job import CallPolicy, Job
from idempotency.exceptions import ImproperlyApplied, KeyPartMissing, StoreUnavailable
from idempotency.functions.arguments import (
    CallArguments,
    FingerprintSpec,
    arguments_hasher,
    older_call_fingerprints,
)
from idempotency.functions.calls import (
    CallAnswers,
    KeySpec,
    call_fingerprint,
    call_job,
    fingerprint_of,
    key_builder,
)
from idempotency.functions.decorator import is_django_task
from idempotency.functions.results import ResultCodec, return_annotation
from idempotency.stores.base import ClaimStatus, KeyState

__all__ = [
    "IdempotentTask",
    "idempotent_task",
    "purge_expired_records_task",
    "purge_expired_submit_tokens_task",
]

logger = logging.getLogger("idempotency")

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


@dataclass
class _Running:
    """The claim of the task running in this context (for :meth:`IdempotentTask.retry`)."""

    task: IdempotentTask
    job: Job
    claim: KeyState

    def release(self, reason: BaseException | None) -> None:
        if not self.job.finished:
            engine.release(self.job, self.claim, reason)


class TaskAnswers(CallAnswers):
    """:class:`~idempotency.functions.calls.CallAnswers` for one delivery of a task: a duplicate
    of a key in progress is deferred (published again for later), and the body runs
    with its claim known to :meth:`IdempotentTask.retry`."""

    def __init__(
        self,
        task: IdempotentTask,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        codec: ResultCodec,
        store_errors: bool,
        on_replay: Any,
        legacy: str,
        older: Callable[[], list[str]] | None,
    ) -> None:
        super().__init__(codec, store_errors, on_replay, legacy, older)
        self.task = task
        self.args = args
        self.kwargs = kwargs
        self.claim: KeyState | None = None

    def replay(self, job: Job, claim: KeyState) -> Any:
        logger.info(
            "idempotency: task %s is a duplicate of key %s; acknowledged and skipped",
            self.task.name,
            job.ref,
        )
        return super().replay(job, claim)

    def refuse(self, job: Job, claim: KeyState) -> Any:
        if claim.status is not ClaimStatus.MISMATCH:
            self.task._defer(job, claim, self.args, self.kwargs)
        return super().refuse(job, claim)

    def bind(self, job: Job, claim: KeyState | None) -> None:
        self.claim = claim


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
    idempotency_wait: float | None = None
    idempotency_store: Any = None
    idempotency_mode: str | None = None
    idempotency_optional: bool = False
    idempotency_fingerprint: FingerprintSpec = None
    idempotency_serializer: Any = None
    idempotency_store_errors: bool | None = None
    idempotency_on_replay: Any = None

    # -- configuration hooks ---------------------------------------------------------

    def _option(self, name: str) -> Any:
        # read statically: a function stored as a class attribute must not become a method
        value = inspect.getattr_static(self, name, None)
        if isinstance(value, staticmethod | classmethod):
            value = value.__get__(self, type(self))
        return value

    def _derived(self, name: str, make: Callable[[], T]) -> T:
        """Built once per task from its options (key builder, hasher, codec): ``name``
        always names what the same ``make`` builds."""
        cache: dict[str, Any] = self.__dict__.setdefault("_idempotency_derived", {})
        if name not in cache:
            cache[name] = make()
        built: T = cache[name]
        return built

    def get_idempotency_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """The key of this delivery, or None to run it without idempotency."""
        spec: KeySpec | None = self._option("idempotency_key")  # as the class declares it
        if spec is None:
            task_id = self.request.id
            return None if self.request.called_directly or not task_id else str(task_id)
        builder = self._derived(
            "key", lambda: key_builder(spec, self.run, owner=f"task {self.name}")
        )
        try:
            return builder(CallArguments(args, kwargs))
        except KeyPartMissing as exc:
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
            wait=self.idempotency_wait,
            store=self.idempotency_store,
            mode=self.idempotency_mode,
            store_errors=self.idempotency_store_errors,
        )

    def idempotent_call(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Job, TaskAnswers] | None:
        """This delivery's job and adapter; None to run it without idempotency."""
        if not idempotency_settings.ENABLED:
            return None
        key = self.get_idempotency_key(args, kwargs)
        if key is None:
            return None
        policy = self.get_idempotency_policy()
        codec = self._derived(
            "codec",
            lambda: ResultCodec(
                owner=f"task {self.name}",
                annotation=return_annotation(self.run),
                serializer=self._option("idempotency_serializer"),
            ),
        )
        fingerprint, older = self._fingerprints(args, kwargs)
        job = call_job(
            policy,
            scope=self.idempotency_scope,
            key=key,
            fingerprint=fingerprint,
            owner=self.name,
            interface="task",
        )
        answers = TaskAnswers(
            self,
            args,
            kwargs,
            codec=codec,
            store_errors=policy.get_store_errors(),
            on_replay=self._option("idempotency_on_replay"),
            legacy=fingerprint_of("task", self.name),
            older=older,
        )
        return job, answers

    # -- the flow --------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        keyed = self.idempotent_call(args, kwargs)
        if keyed is None:
            return super().__call__(*args, **kwargs)
        job, answers = keyed

        def body() -> Any:
            assert answers.claim is not None
            token = _running.set(_Running(self, job, answers.claim))
            try:
                return super(IdempotentTask, self).__call__(*args, **kwargs)
            finally:
                _running.reset(token)

        try:
            return engine.run(job, answers, body)
        except StoreUnavailable as exc:
            if job.started:
                raise
            self._retry_unavailable(job, exc, args, kwargs)

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
    func: None = None, /, **options: Any
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
    wait: float | None = None,
    mode: str | None = None,
    optional: bool = False,
    fingerprint: FingerprintSpec = None,
    serializer: Any = None,
    store_errors: bool | None = None,
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
    if is_django_task(func):
        raise ImproperlyApplied(
            f"@idempotent_task makes Celery tasks, got the Django task {func!r}: use "
            "@idempotent_django_task (from idempotency) for Django tasks, over or under @task"
        )
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
