"""Idempotent Django tasks (``django.tasks``, DEP 14; on Django 5.2 the ``django-tasks``
backport): ``@idempotent_django_task``. A task result delivered again, or a task enqueued
again with the same business key, runs its body once; the other runs answer with the
stored result. The flow and the options: docs/howto/django-tasks.md.

Django promises no delivery guarantee, and its real backends deliver at least once: a
worker killed mid-task leaves its result to be run again, and a failed task is enqueued
again under a new result id. The key is the task result's id by default, or a business
key built from the task's arguments (``key="receipt:{order_id}"``), which survives a new
result id. Either way the task takes its context (``@task(takes_context=True)``): it
holds the result id and the task as it was enqueued (queue, priority, backend), which a
deferred copy keeps.

A run that finds its key in progress elsewhere enqueues a copy of itself to run later
(``run_after``) where the backend supports deferral (``supports_defer``), and ends with
:class:`~idempotency.exceptions.TaskDeferred`; elsewhere it fails with
:class:`~idempotency.exceptions.CallInProgress` (:class:`~idempotency.exceptions.StoreUnavailable`
when the store is unreachable), for the backend's own retry. A copy of a task keyed on
its result id carries that key (the keyword argument ``_idempotency_key``), since the copy
has a result id of its own.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NoReturn

from django.utils import timezone

from idempotency.conf import idempotency_settings
from idempotency.core.job import CallPolicy, Job, ReplayedRecord
from idempotency.exceptions import ImproperlyApplied, TaskDeferred
from idempotency.functions.arguments import (
    CallArguments,
    FingerprintSpec,
    KeySpec,
    arguments_hasher,
    check_key,
    key_builder,
    qualified_name,
)
from idempotency.functions.decorator import CallAnswers, Callee, built_key
from idempotency.functions.results import ResultCodec, Serializer, return_annotation

try:  # Django 6.0+
    from django.tasks.base import Task, TaskContext
except ImportError:  # Django 5.2: the backport
    try:
        from django_tasks.base import (  # type: ignore[no-redef,assignment,import-not-found,unused-ignore]  # one of the two is there
            Task,
            TaskContext,
        )
    except ImportError as exc:
        raise ImportError(
            "idempotent_django_task needs Django 6.0+ (django.tasks) or, on Django 5.2, "
            "the django-tasks package (the backport: pip install django-tasks)"
        ) from exc

__all__ = ["DEFERRED_KEY", "MIN_DEFER_SECONDS", "idempotent_django_task"]

logger = logging.getLogger("idempotency")

#: The keyword argument that carries the key into the deferred copy of a task keyed on
#: its result id (the copy's own result id is another one). The wrapper takes it out
#: before the task's function sees the arguments.
DEFERRED_KEY = "_idempotency_key"
#: Shortest wait of a deferred copy, so a copy never spins.
MIN_DEFER_SECONDS = 0.5
#: Set on the wrapper: the function is an idempotent Django task's already.
MARK = "idempotent_django_task"


@dataclasses.dataclass
class _Run:
    """One run of an idempotent Django task: what a deferral enqueues again."""

    context: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    #: The key is the result id: the copy carries it (:data:`DEFERRED_KEY`)
    carries_key: bool

    def _copy(self, job: Job, seconds: float) -> tuple[Any, dict[str, Any]] | None:
        """The task and keyword arguments of this run's deferred copy (starting after
        ``seconds``); None where the backend cannot defer."""
        task = self.context.task_result.task  # as enqueued: its queue, priority, backend
        if not task.get_backend().supports_defer:
            logger.info(
                "idempotency: Django task %s key %s cannot run now and its backend cannot "
                "defer: failed for the backend to retry",
                task.name,
                job.ref,
            )
            return None
        when = timezone.now() + timedelta(seconds=max(float(seconds), MIN_DEFER_SECONDS))
        kwargs = {**self.kwargs, DEFERRED_KEY: job.key} if self.carries_key else self.kwargs
        return task.using(run_after=when), kwargs

    def defer(self, job: Job, seconds: float, reason: Exception) -> NoReturn:
        """Enqueue a copy of this run to start after ``seconds``, and end this one with
        :class:`TaskDeferred`; raise ``reason`` where the backend cannot defer."""
        copy_of = self._copy(job, seconds)
        if copy_of is None:
            raise reason
        task, kwargs = copy_of
        self._deferred(job, task, task.enqueue(*self.args, **kwargs), reason)

    async def adefer(self, job: Job, seconds: float, reason: Exception) -> NoReturn:
        """:meth:`defer` for an async task (the copy enqueued with ``aenqueue``)."""
        copy_of = self._copy(job, seconds)
        if copy_of is None:
            raise reason
        task, kwargs = copy_of
        self._deferred(job, task, await task.aenqueue(*self.args, **kwargs), reason)

    def _deferred(self, job: Job, task: Any, copy: Any, reason: Exception) -> NoReturn:
        logger.info(
            "idempotency: Django task %s key %s cannot run now; deferred as result %s",
            task.name,
            job.ref,
            copy.id,
        )
        when = task.run_after.isoformat()
        raise TaskDeferred(job.scope, job.key, str(copy.id), when) from reason


def _takes_context(func: Callable[..., Any]) -> bool:
    """Whether ``func``'s first parameter is ``context`` (Django's rule for
    ``takes_context=True``)."""
    parameters = list(inspect.signature(func).parameters)
    return bool(parameters) and parameters[0] == "context"


def _wrap(
    func: Callable[..., Any],
    *,
    takes_context: bool,
    key: KeySpec | None,
    scope: str,
    policy: CallPolicy,
    optional: bool,
    fingerprint: FingerprintSpec,
    serializer: Serializer | None,
    on_replay: Callable[[Any, ReplayedRecord], Any] | None,
) -> Callable[..., Any]:
    owner = qualified_name(func)
    if getattr(func, MARK, False):
        raise ImproperlyApplied(f"@idempotent_django_task is applied to {owner} twice")
    asynchronous = inspect.iscoroutinefunction(func)
    if asynchronous and policy.mode == "atomic":
        raise ImproperlyApplied(
            f"@idempotent_django_task on {owner}: async tasks cannot use atomic mode; "
            "use mode='lease'"
        )
    if not takes_context:
        raise ImproperlyApplied(
            f"@idempotent_django_task on {owner} needs the task's context: declare the "
            "task with @task(takes_context=True) and a first parameter named 'context'. "
            "The context holds the result id (the default key) and the task as it was "
            "enqueued (its queue, priority and backend), which a deferred run enqueues again"
        )
    # the key and the fingerprint see the task's arguments, without its context
    shown: Callable[..., Any] = functools.partial(func, None)
    build = None if key is None else key_builder(key, shown, owner=f"task {owner}")
    hasher = arguments_hasher(fingerprint, shown, owner=f"task {owner}")
    codec = ResultCodec(
        owner=f"task {owner}", annotation=return_annotation(func), serializer=serializer
    )
    callee = Callee(policy, owner, "task", codec, on_replay)

    def keyed(
        args: tuple[Any, ...], kwargs: dict[str, Any], carried: Any
    ) -> tuple[str, CallAnswers, _Run] | None:
        """This run's key, adapter and deferral; None to run the body plainly."""
        context = args[0] if args else None
        if not isinstance(context, TaskContext):
            raise ImproperlyApplied(
                f"{owner} takes a context but was run without one: declare it with "
                "@task(takes_context=True)"
            )
        arguments = CallArguments(args[1:], kwargs)
        call_key: str | None
        if carried is not None or build is None:
            call_key = check_key(
                carried if carried is not None else str(context.task_result.id),
                owner=f"task {owner}",
            )
        else:
            call_key = built_key(build, arguments, optional=optional, owner=f"task {owner}")
        if call_key is None:
            return None
        answers = CallAnswers(callee, hasher(arguments) if hasher else None)
        return call_key, answers, _Run(context, args[1:], kwargs, carries_key=build is None)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        carried = kwargs.pop(DEFERRED_KEY, None)
        found = keyed(args, kwargs, carried) if idempotency_settings.ENABLED else None
        if found is None:
            return func(*args, **kwargs)
        call_key, answers, run = found
        return callee.run(scope, call_key, answers, lambda: func(*args, **kwargs), run.defer)

    async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
        carried = kwargs.pop(DEFERRED_KEY, None)
        found = keyed(args, kwargs, carried) if idempotency_settings.ENABLED else None
        if found is None:
            return await func(*args, **kwargs)
        call_key, answers, run = found
        return await callee.arun(
            scope, call_key, answers, lambda: func(*args, **kwargs), run.adefer
        )

    chosen = functools.wraps(func)(async_wrapper if asynchronous else wrapper)
    setattr(chosen, MARK, True)
    chosen.idempotency_scope = scope  # type: ignore[attr-defined]  # a function's attribute
    return chosen


def idempotent_django_task(
    target: Any = None,
    /,
    *,
    key: KeySpec | None = None,
    scope: str = "tasks",
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
) -> Any:
    """Make a Django task (``django.tasks``) run its body once per key.

    Stack it under ``@task`` (it then wraps the function the task runs) or over it (it
    returns the same task, running the wrapped function); both give the same task.
    Usable bare (``@idempotent_django_task``) or called. The task takes its context:
    ``@task(takes_context=True)`` and a first parameter ``context`` (else
    :class:`~idempotency.exceptions.ImproperlyApplied`).

    ``key``
        None (the default): the task result's id (``context.task_result.id``). Or a
        business key from the task's arguments (the context left out), exactly as
        :func:`~idempotency.functions.idempotent_function` builds it: a format string
        (``"receipt:{order_id}"``), a callable of the arguments, or
        :func:`~idempotency.functions.arguments.payload_key`. A business key is the same
        for a task enqueued again under a new result id.
    ``scope``
        Namespace of the keys (default ``"tasks"``, as Celery tasks').

    ``ttl``, ``lease``, ``store``, ``wait``, ``mode``, ``optional``, ``fingerprint``,
    ``serializer``, ``store_errors`` and ``on_replay`` are
    :func:`~idempotency.functions.idempotent_function`'s. A run that finds its key in
    progress (after ``wait``) is deferred with ``run_after`` where the backend supports
    it (it ends with :class:`~idempotency.exceptions.TaskDeferred`), and otherwise fails
    with :class:`~idempotency.exceptions.CallInProgress` for the backend to retry.
    """
    if isinstance(key, type):
        raise TypeError("key must be a format string or a function of the arguments")
    policy = CallPolicy(
        ttl=ttl, lease=lease, wait=wait, store=store, mode=mode, store_errors=store_errors
    )
    options: dict[str, Any] = {
        "key": key,
        "scope": scope,
        "policy": policy,
        "optional": optional,
        "fingerprint": fingerprint,
        "serializer": serializer,
        "on_replay": on_replay,
    }

    def decorate(target: Any) -> Any:
        if isinstance(target, Task):
            wrapped = _wrap(target.func, takes_context=target.takes_context, **options)
            # the same task, running the wrapped function (validated again by its backend)
            return dataclasses.replace(target, func=wrapped)
        if not inspect.isfunction(target):
            raise TypeError(
                "@idempotent_django_task decorates a function or a Django task (@task), "
                f"got {target!r}"
            )
        return _wrap(target, takes_context=_takes_context(target), **options)

    if target is not None:
        return decorate(target)
    return decorate
