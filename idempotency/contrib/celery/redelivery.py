"""How an idempotent Celery task delivers a message again that cannot run now (its key
is in progress elsewhere, or the store is unreachable), without spending a retry."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NoReturn

import celery
from celery import Task
from celery.app.task import Context
from celery.exceptions import Reject, Retry

from idempotency.core.job import Job
from idempotency.exceptions import CallInProgress, StoreUnavailable
from idempotency.stores.base import KeyState

logger = logging.getLogger("idempotency")

#: Shortest countdown of a deferred duplicate, so a retry never spins.
MIN_DEFER_SECONDS = 0.5

# celery-types makes Task generic; Celery itself can be subscripted only from 5.7 on
if TYPE_CHECKING:
    BaseTask = Task[Any, Any]
else:
    BaseTask = Task

OLD_CELERY = tuple(int(part) for part in celery.__version__.split(".")[:2]) < (5, 5)


class Redelivery(BaseTask):
    """The deferrals of :class:`~idempotency.contrib.celery.IdempotentTask`."""

    if OLD_CELERY:

        def push_request(self, *args: Any, **kwargs: Any) -> None:
            # The body runs through Task.__call__, which pushes a request of its own:
            # from Celery 5.5 on it inherits the delivery's (id, retries, is_eager); in
            # 5.3 and 5.4 it started blank, so a retry from the body raised its exception
            # as if called directly. Drop this when the oldest supported Celery is 5.5.
            inherited = dict(vars(self.request))
            inherited.update(kwargs)
            self.request_stack.push(Context(*args, **inherited))

    def _retry_unavailable(
        self,
        job: Job,
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
            "idempotency: task %s key %s: the store is unreachable; deferred %.1f s",
            self.name,
            job.ref,
            countdown,
        )
        reason = f"store unreachable for key {job.ref}"
        self._republish(args, kwargs, countdown, reason, exc)

    def _defer(
        self, job: Job, claim: KeyState, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> NoReturn:
        """A delivery of a key still in progress: run again once its lease has passed.

        The message is published again with a countdown and the same ``retries`` count,
        then this delivery ends as Celery's ``Retry`` does (acknowledged, state RETRY).
        Unlike ``Task.retry`` it spends none of the task's retry budget and sets nothing
        on the task instance, which every delivery in the worker shares.
        """
        request = self.request
        if request.called_directly or request.is_eager:
            raise CallInProgress(job.scope, job.key)
        countdown = max(float(claim.retry_after), MIN_DEFER_SECONDS)
        logger.info(
            "idempotency: task %s key %s is in progress elsewhere; deferred %.1f s",
            self.name,
            job.ref,
            countdown,
        )
        reason = f"key {job.ref} is in progress elsewhere"
        self._republish(args, kwargs, countdown, reason)

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
