"""Idempotent Celery tasks: a redelivered or re-published message runs its work once.

Brokers deliver *at least once*: a worker that dies before acknowledging, a
visibility timeout that passes, a producer that retries a publish, a beat
schedule that fires twice. :class:`IdempotentTask` turns that into
*effectively once*. Two equivalent spellings::

    from celery import shared_task
    from idempotency import IdempotentTask, idempotent_task

    # Celery's own style: the base class, configured by task options
    @shared_task(base=IdempotentTask, idempotency_key="msg_{message_id}_{consumer}")
    def consume(message_id: str, consumer: str, payload: dict) -> dict: ...

    # the shortcut: same thing (shared_task, or app.task with app=...)
    @idempotent_task(key="msg_{message_id}_{consumer}", autoretry_for=(IOError,))
    def consume(message_id: str, consumer: str, payload: dict) -> dict: ...

How a delivery is handled (the lease mode of the store contract, as in
:mod:`idempotency.functions`):

* **key**: ``idempotency_key = None`` (the default) uses the task id, so the same
  message delivered twice, or published twice with the same ``task_id``, is a
  duplicate. A format string (formatted with the task's bound arguments) or a
  callable of the arguments derives it from the message instead, so two
  *different* messages carrying the same business id are duplicates too. A task
  called directly (``task(...)``, no task id) with the default key just runs.
* **completed**: a duplicate is acknowledged and skipped; it returns the stored
  result (as a JSON round trip, like the first run's return value).
* **claimed**: the task runs. An exception (``self.retry()`` and
  ``autoretry_for`` included) **releases** the key before the retry message is
  published, so Celery's retry runs the task again. The result is stored as
  JSON (a non-JSON result releases the key and fails with :class:`TypeError`).
* **in progress**: another delivery of the key is running, or its worker died
  without acknowledging. The duplicate is not dropped (the work could be lost
  with the dead worker): it is published again with a countdown of the rest of
  the lease and this delivery ends in state RETRY. Once the lease has passed,
  the next delivery takes the key over and runs the work. A deferral is **not**
  a retry of the task: ``request.retries`` stays as it was, ``max_retries`` is
  never spent by deferrals, and nothing is set on the task instance (which
  every delivery in a worker shares). Under
  ``task_always_eager`` (or a direct call) an in-progress key raises
  :class:`~idempotency.exceptions.InProgress` instead.
* **fencing**: a worker whose lease was taken over (it was only slow, not dead)
  cannot overwrite the new owner's result: its completion is refused and logged
  as a warning.

**Groups and chords.** Each task of a group or a chord is keyed on its own (by its
task id, unless ``idempotency_key`` derives the key from the arguments). A duplicate
delivery of a header task is acknowledged and returns the stored result, which the
result backend receives again: Celery's Redis result backend records each header
task once (by task id), so the chord still counts every part once and dispatches its
body once. A duplicate delivery of the body, or the same chord published again with
the same task ids, runs nothing again either: every task returns its stored result.
A chord published again with *new* task ids and the default key runs again; derive
the keys from the message (``idempotency_key=...``) when a publisher may do that.
Other result backends may count a redelivered header task twice: use the Redis
backend for chords of idempotent tasks, or give the body an idempotent key of its own.

``acks_late`` and ``reject_on_worker_lost`` default to True on
:class:`IdempotentTask`: the message is acknowledged only after the task ran, so
a worker killed mid-task gets it redelivered, and the key makes that safe.

Options (class attributes, or task options of ``app.task``/``shared_task``):

``idempotency_key``
    None (task id), a format string of the arguments, or a callable of them.
``idempotency_scope``
    Namespace of the keys, default ``"tasks"``. The record's fingerprint is the
    task's name, so one key claimed by two tasks raises
    :class:`~idempotency.functions.FunctionKeyMismatch` (the task fails).
``idempotency_lease``
    Seconds a delivery owns its key before a redelivery may take it over. Default:
    the task's hard ``time_limit`` (or ``task_time_limit``) when set, since the
    worker kills the task by then, else the ``LEASE`` setting. Keep it above the
    task's longest run.
``idempotency_ttl``
    Seconds the result is kept (default: the ``TTL`` setting).
``idempotency_wait``
    Seconds a duplicate first waits for a running owner to finish (default 0:
    defer at once).
``idempotency_store``
    Store instance, class or dotted path (default: the ``STORE`` setting).
``idempotency_mode``
    ``"lease"`` (default), ``"atomic"`` or ``"auto"``, as for
    :func:`~idempotency.functions.idempotent_function`: in atomic mode (database store)
    the claim, the task's database writes and its stored result commit in one
    transaction, so a worker killed mid-task leaves nothing behind and its redelivery
    runs at once, with no lease to wait out.

Also here: the Celery beat tasks ``idempotency.purge_expired_records`` and
``idempotency.purge_expired_submit_tokens``.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, ParamSpec, TypeVar, cast, overload

from celery import Celery, Task, shared_task
from celery.exceptions import Reject, Retry

from idempotency import signals
from idempotency.calls import (
    KeyedCall,
    KeySpec,
    acquire,
    fingerprint_of,
    finish,
    key_builder,
    replayed,
    runs_atomic,
    transaction_for,
)
from idempotency.conf import MODES, idempotency_settings
from idempotency.exceptions import ImproperlyApplied, StoreUnavailable
from idempotency.stores import get_store
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
#: Shortest countdown of a deferred duplicate, so a retry never spins.
MIN_DEFER_SECONDS = 0.5


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


_running: contextvars.ContextVar[_Running | None] = contextvars.ContextVar(
    "idempotency_running_task", default=None
)


class IdempotentTask(Task[Any, Any]):
    """Celery task base class: a duplicate delivery of a key returns the stored result.

    See the module documentation for the flow and the options.
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

    _idempotency_builder: Callable[[tuple[Any, ...], dict[str, Any]], str] | None = None

    # -- configuration hooks ---------------------------------------------------------

    def _key_spec(self) -> KeySpec | None:
        # read statically: a function stored as a class attribute must not become a method
        spec = inspect.getattr_static(self, "idempotency_key", None)
        if isinstance(spec, staticmethod | classmethod):
            spec = spec.__get__(self, type(self))
        return cast("KeySpec | None", spec)

    def get_idempotency_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """The key of this delivery, or None to run it without idempotency."""
        spec = self._key_spec()
        if spec is None:
            task_id = self.request.id
            return None if self.request.called_directly or not task_id else str(task_id)
        builder = self.__dict__.get("_idempotency_builder")
        if builder is None:
            builder = key_builder(spec, self.run, owner=f"task {self.name}")
            self._idempotency_builder = builder
        return builder(args, kwargs)

    def get_idempotency_lease(self) -> float:
        if self.idempotency_lease is not None:
            return float(self.idempotency_lease)
        time_limit = self.time_limit or self.app.conf.task_time_limit
        if time_limit:
            return float(time_limit)
        return float(idempotency_settings.LEASE)

    def idempotent_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> KeyedCall | None:
        key = self.get_idempotency_key(args, kwargs)
        if key is None:
            return None
        ttl = self.idempotency_ttl
        store = get_store(self.idempotency_store)
        return KeyedCall(
            store=store,
            scope=self.idempotency_scope,
            key=key,
            fingerprint=fingerprint_of("task", self.name),
            owner=self.name,
            lease=self.get_idempotency_lease(),
            ttl=float(idempotency_settings.TTL if ttl is None else ttl),
            wait=float(self.idempotency_wait or 0.0),
            method=TASK_METHOD,
            atomic=runs_atomic(store, self.idempotency_mode),
        )

    # -- the flow --------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        call = self.idempotent_call(args, kwargs)
        if call is None:
            return super().__call__(*args, **kwargs)
        with transaction_for(call.store, self.idempotency_mode):
            return self._run_keyed(call, args, kwargs)

    def _run_keyed(self, call: KeyedCall, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            claim = acquire(call)
        except StoreUnavailable as exc:
            self._retry_unavailable(call, exc, args, kwargs)
        if claim.status is ClaimStatus.COMPLETED:
            logger.info(
                "idempotency: task %s[%s] is a duplicate of key %s; acknowledged and skipped",
                self.name,
                self.request.id,
                call.key,
            )
            return replayed(call, claim)
        if claim.status is not ClaimStatus.CLAIMED:
            self._defer(call, claim, args, kwargs)
        running = _Running(self, call, claim)
        token = _running.set(running)
        try:
            result = super().__call__(*args, **kwargs)
        except BaseException as exc:
            running.release(exc)
            raise
        finally:
            _running.reset(token)
        if running.released:
            # the body called self.retry() and swallowed its Retry: nothing to store
            return result
        return finish(call, claim, result)

    def _retry_unavailable(
        self,
        call: KeyedCall,
        exc: StoreUnavailable,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> NoReturn:
        """The store is unreachable, so the body did not run: deliver the message again
        later, as :meth:`_defer` does (no retry budget spent: an outage is not the task's
        failure). Eager and direct calls raise :class:`StoreUnavailable` instead."""
        request = self.request
        if request.called_directly or request.is_eager:
            raise exc
        countdown = max(float(exc.retry_after), MIN_DEFER_SECONDS)
        logger.warning(
            "idempotency: task %s[%s] key %s: the store is unreachable; deferred %.1f s",
            self.name,
            request.id,
            call.key,
            countdown,
        )
        self._republish(args, kwargs, countdown, f"store unreachable for key {call.key}", exc)

    def _defer(
        self, call: KeyedCall, claim: Claim, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> NoReturn:
        """A delivery of a key still in progress: run again once its lease has passed.

        The message is published again with a countdown and the same ``retries`` count,
        then this delivery ends as Celery's ``Retry`` does (acknowledged, state RETRY).
        Unlike ``Task.retry`` it spends none of the task's retry budget and sets nothing
        on the task instance, which every delivery in the worker shares.
        """
        request = self.request
        if request.called_directly or request.is_eager:
            raise call.in_progress()
        signals.conflict.send(sender=type(call.store), request=None, scope=call.scope, key=call.key)
        countdown = max(float(claim.retry_after), MIN_DEFER_SECONDS)
        logger.info(
            "idempotency: task %s[%s] key %s is in progress elsewhere; deferred %.1f s",
            self.name,
            request.id,
            call.key,
            countdown,
        )
        self._republish(args, kwargs, countdown, f"key {call.key} is in progress elsewhere")

    def _republish(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        countdown: float,
        reason: str,
        exc: Exception | None = None,
    ) -> NoReturn:
        """Publish this delivery again after ``countdown`` with the same ``retries`` count,
        and end this one as Celery's ``Retry`` does (acknowledged, state RETRY)."""
        request = self.request
        deferred = self.signature_from_request(
            request, args, kwargs, countdown=countdown, retries=request.retries
        )
        try:
            deferred.apply_async()
        except Exception as publish_error:
            # not re-published: hand the message back to the broker rather than lose it
            raise Reject(publish_error, requeue=True) from publish_error
        when: Any = countdown  # the stubs want numbers.Real, which float is at runtime
        raise Retry(reason, exc=exc, when=when, sig=deferred)

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
    **options: Any,
) -> Any:
    """Declare an idempotent Celery task: ``app.task`` (or ``shared_task``) with
    ``base=IdempotentTask``.

    ``key``, ``scope``, ``ttl``, ``lease``, ``store``, ``wait`` and ``mode`` set the
    ``idempotency_*`` options of :class:`IdempotentTask` (``mode`` as for
    :func:`~idempotency.functions.idempotent_function`: ``"lease"``, ``"atomic"`` or
    ``"auto"``); every other keyword
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
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
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
    }
    decorator: Any = (app.task if app is not None else shared_task)(**attributes, **options)
    if func is not None:
        return decorator(func)
    return decorator


@shared_task(name="idempotency.purge_expired_records")
def purge_expired_records_task(
    batch_size: int | None = None, max_batches: int | None = None
) -> int:
    """Celery beat task: delete expired idempotency records in bounded batches.

    Schedule it with ``{"task": "idempotency.purge_expired_records", "schedule": 3600}``.
    Returns the number of records deleted.
    """
    from idempotency.purge import purge_expired_records

    result = purge_expired_records(batch_size=batch_size, max_batches=max_batches)
    return int(result.deleted)


@shared_task(name="idempotency.purge_expired_submit_tokens")
def purge_expired_submit_tokens_task(batch_size: int | None = None) -> int:
    """Celery beat task: delete expired one-time submit tokens (database backend)."""
    from idempotency.tokens import purge_expired_submit_tokens

    return purge_expired_submit_tokens(batch_size=batch_size)
