"""Idempotent Celery tasks: a redelivered or re-published message runs its work once
(``IdempotentTask``, ``idempotent_task``; the flow and the options: docs/howto/celery.md),
and the beat tasks that purge expired records and submit tokens."""

from __future__ import annotations

import contextvars
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar, overload

import celery
from celery import Celery, Task, shared_task
from celery.app.task import Context
from celery.exceptions import Reject, Retry

from idempotency.conf import idempotency_settings
from idempotency.core import engine
from idempotency.core.job import CallPolicy, Job
from idempotency.exceptions import ImproperlyApplied, StoreUnavailable
from idempotency.functions.arguments import (
    CallArguments,
    FingerprintSpec,
    KeySpec,
    arguments_hasher,
    call_fingerprint,
    key_builder,
)
from idempotency.functions.decorator import (
    CallAnswers,
    Callee,
    built_key,
    is_django_task,
)
from idempotency.functions.results import ResultCodec, return_annotation

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

#: Shortest countdown of a deferred duplicate, so a retry never spins.
MIN_DEFER_SECONDS = 0.5

# celery-types makes Task generic; Celery itself can be subscripted only from 5.7 on
if TYPE_CHECKING:
    BaseTask = Task[Any, Any]
else:
    BaseTask = Task

OLD_CELERY = tuple(int(part) for part in celery.__version__.split(".")[:2]) < (5, 5)


@dataclass
class _Running:
    """The task running in this context, and its call (for :meth:`IdempotentTask.retry`)."""

    task: IdempotentTask
    answers: CallAnswers

    def release(self) -> None:
        job, claim = self.answers.job, self.answers.claim
        if job is not None and claim is not None and not job.finished:
            engine.release(job, claim)


_running: contextvars.ContextVar[_Running | None] = contextvars.ContextVar(
    "idempotency_running_task", default=None
)


class IdempotentTask(BaseTask):
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
        build = self._derived("key", lambda: key_builder(spec, self.run, owner=f"task {self.name}"))
        arguments = CallArguments(args, kwargs)
        return built_key(
            build, arguments, optional=self.idempotency_optional, owner=f"task {self.name}"
        )

    def get_idempotency_fingerprint(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """This delivery's fingerprint: the task's name, and the keyed hash of its arguments."""
        return call_fingerprint("task", self.name, self._arguments_digest(args, kwargs))

    def _arguments_digest(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes | None:
        spec = self._option("idempotency_fingerprint")
        hasher = self._derived(
            "hasher", lambda: arguments_hasher(spec, self.run, owner=f"task {self.name}")
        )
        return None if hasher is None else hasher(CallArguments(args, kwargs))

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
    ) -> tuple[Callee, str, CallAnswers] | None:
        """This delivery's callee, key and adapter; None to run it without idempotency."""
        if not idempotency_settings.ENABLED:
            return None
        key = self.get_idempotency_key(args, kwargs)
        if key is None:
            return None
        codec = self._derived(
            "codec",
            lambda: ResultCodec(
                owner=f"task {self.name}",
                annotation=return_annotation(self.run),
                serializer=self._option("idempotency_serializer"),
            ),
        )
        policy, on_replay = self.get_idempotency_policy(), self._option("idempotency_on_replay")
        callee = Callee(policy, self.name, "task", codec, on_replay)
        # a subclass that fingerprints deliveries its own way accepts no older fingerprints
        if type(self).get_idempotency_fingerprint is not IdempotentTask.get_idempotency_fingerprint:
            own = self.get_idempotency_fingerprint(args, kwargs)
            return callee, key, CallAnswers(callee, None, fingerprint=own)
        return callee, key, CallAnswers(callee, self._arguments_digest(args, kwargs))

    # -- the flow --------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        keyed = self.idempotent_call(args, kwargs)
        if keyed is None:
            return super().__call__(*args, **kwargs)
        callee, key, answers = keyed

        def body() -> Any:
            token = _running.set(_Running(self, answers))
            try:
                return super(IdempotentTask, self).__call__(*args, **kwargs)
            finally:
                _running.reset(token)

        def defer(job: Job, seconds: float, reason: Exception) -> NoReturn:
            self._defer(job, seconds, reason, args, kwargs)

        return callee.run(self.idempotency_scope, key, answers, body, defer)

    def retry(self, *args: Any, **kwargs: Any) -> Any:
        """Celery's retry, after releasing this delivery's key (so the retry can claim it).

        The key is freed *before* the retry message is published: a worker picking the
        retry up at once finds the key free instead of deferring it for a whole lease.
        """
        running = _running.get()
        if running is not None and running.task is self:
            running.release()
        return Task.retry(self, *args, **kwargs)

    # -- deliveries that cannot run now ----------------------------------------------

    if OLD_CELERY:

        def push_request(self, *args: Any, **kwargs: Any) -> None:
            # The body runs through Task.__call__, which pushes a request of its own:
            # from Celery 5.5 on it inherits the delivery's (id, retries, is_eager); in
            # 5.3 and 5.4 it started blank, so a retry from the body raised its exception
            # as if called directly. Drop this when the oldest supported Celery is 5.5.
            inherited = dict(vars(self.request))
            inherited.update(kwargs)
            self.request_stack.push(Context(*args, **inherited))

    def _defer(
        self,
        job: Job,
        seconds: float,
        reason: Exception,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> NoReturn:
        """A delivery that cannot run now (its key in progress elsewhere, or the store
        unreachable before the body ran): published again to run after ``seconds``, with
        the same ``retries`` count, and this delivery ends as Celery's ``Retry`` does
        (acknowledged, state RETRY). Unlike ``Task.retry`` it spends none of the task's
        retry budget (an outage or a duplicate is not the task's failure) and sets nothing
        on the task instance, which every delivery in the worker shares. Eager and direct
        calls raise ``reason`` (``CallInProgress``, ``StoreUnavailable``) instead."""
        request = self.request
        if request.called_directly or request.is_eager:
            raise reason
        countdown = max(float(seconds), MIN_DEFER_SECONDS)
        outage = isinstance(reason, StoreUnavailable)
        why = "the store is unreachable" if outage else "in progress elsewhere"
        logger.log(
            logging.WARNING if outage else logging.INFO,
            "idempotency: task %s key %s: %s; deferred %.1f s",
            self.name,
            job.ref,
            why,
            countdown,
        )
        deferred = self.signature_from_request(
            request, args, kwargs, countdown=countdown, retries=request.retries
        )
        try:
            deferred.apply_async()
        except Exception as publish_error:
            # not re-published: hand the message back to the broker rather than lose it
            raise Reject(publish_error, requeue=True) from publish_error
        when: Any = countdown  # the stubs want numbers.Real, which float is at runtime
        raise Retry(
            f"key {job.ref}: {why}", exc=reason if outage else None, when=when, sig=deferred
        )


@shared_task(name="idempotency.purge_expired_records")
def purge_expired_records_task(
    batch_size: int | None = None, max_batches: int | None = None
) -> int:
    """Celery beat task: delete expired idempotency records in bounded batches.

    Schedule it with ``{"task": "idempotency.purge_expired_records", "schedule": 3600}``.
    Returns the number of records deleted.
    """
    from idempotency.stores.database import purge_expired_records

    result = purge_expired_records(batch_size=batch_size, max_batches=max_batches)
    return int(result.deleted)


@shared_task(name="idempotency.purge_expired_submit_tokens")
def purge_expired_submit_tokens_task(batch_size: int | None = None) -> int:
    """Celery beat task: delete expired one-time submit tokens (database backend)."""
    from idempotency.tokens import purge_expired_submit_tokens

    return purge_expired_submit_tokens(batch_size=batch_size)


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
