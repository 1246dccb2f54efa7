"""The transactional outbox of order events: written with the change, relayed after it.

Publishing ``order.paid`` straight to the broker when a payment commits loses the
event whenever the broker is unreachable at that moment (the payment is committed,
the publish fails, nothing remembers it). Instead:

1. :func:`outbox_enqueue` inserts an :class:`~orders.models.OutboxMessage` **in the
   payment's transaction**: the message exists if and only if the payment committed.
2. :func:`outbox_relay` publishes pending messages and marks each one sent. It runs
   on commit for the message just written (the fast path), as the beat task
   ``orders.relay_outbox`` and as ``manage.py relay_outbox``. Each message is
   published under a row lock (``SELECT ... FOR UPDATE SKIP LOCKED``, so two relays
   never take the same row) in a transaction that also marks it sent.

Delivery is **at least once**: a relay killed after the broker took a message but
before its transaction committed publishes it again next time, and a broker may
redeliver. The consumer (:mod:`orders.tasks`) deduplicates by ``message_id``, so
the effect happens exactly once. A broker that refuses a publish stops the batch
(the rest would fail too); the message keeps its place, with ``attempts`` and
``last_error`` recorded, and the next run retries it.
"""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass
from typing import Any

from celery import current_app
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from orders.models import OutboxMessage

logger = logging.getLogger(__name__)

#: The Celery task that consumes the outbox's messages (:func:`orders.tasks.order_event_consume`).
CONSUMER_TASK = "orders.consume_order_event"
#: Messages one relay run looks at (``--batch-size``).
DEFAULT_BATCH_SIZE = 100
#: How long a sent message stays in the outbox (for the admin and audits) before
#: :func:`outbox_purge_sent` deletes it. Pending messages are never deleted.
SENT_RETENTION = datetime.timedelta(days=7)


@dataclass(frozen=True)
class RelayResult:
    sent: int
    failed: int
    pending: int

    def __str__(self) -> str:
        return f"{self.sent} sent, {self.failed} failed, {self.pending} pending"


def outbox_enqueue(*, message_id: str, event: str, payload: dict[str, Any]) -> OutboxMessage:
    """Write an event to the outbox, in the caller's transaction; once per ``message_id``."""
    try:
        with transaction.atomic():
            return OutboxMessage.objects.create(message_id=message_id, event=event, payload=payload)
    except IntegrityError:
        existing = OutboxMessage.objects.filter(message_id=message_id).first()
        if existing is None:
            raise
        return existing


def outbox_pending_count() -> int:
    return OutboxMessage.objects.filter(sent_at__isnull=True).count()


def outbox_relay(
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    broker_url: str | None = None,
    queue: str | None = None,
    throttle: float = 0.0,
    message_ids: list[int] | None = None,
) -> RelayResult:
    """Publish up to ``batch_size`` pending messages, oldest first, marking each one sent.

    ``broker_url`` overrides the Celery app's broker, ``queue`` the consumer's queue,
    ``throttle`` pauses between publishes (to spread a large backlog), ``message_ids``
    limits the run to those outbox rows (the on-commit fast path).
    """
    pending = OutboxMessage.objects.filter(sent_at__isnull=True)
    if message_ids is not None:
        pending = pending.filter(pk__in=message_ids)
    ids = list(pending.order_by("pk").values_list("pk", flat=True)[:batch_size])
    sent = failed = 0
    if ids:
        app = _consumer().app
        # no connection retries: an unreachable broker fails the run at once (the next
        # run retries) instead of holding the payment's on-commit publish for seconds
        with app.connection_for_write(
            broker_url, transport_options={"max_retries": 0}
        ) as connection:
            for index, pk in enumerate(ids):
                if index and throttle:
                    time.sleep(throttle)
                try:
                    sent += _relay_one(pk, connection=connection, queue=queue)
                except Exception as exc:
                    failed += 1
                    _record_failure(pk, exc)
                    break  # the broker refused one: the rest would fail the same way
    return RelayResult(sent=sent, failed=failed, pending=outbox_pending_count())


def _relay_one(pk: int, *, connection: Any, queue: str | None) -> int:
    """Publish one message and mark it sent, in one transaction under its row lock."""
    with transaction.atomic():
        message = (
            OutboxMessage.objects.select_for_update(skip_locked=True)
            .filter(pk=pk, sent_at__isnull=True)
            .first()
        )
        if message is None:
            return 0  # sent meanwhile, or another relay holds it
        _publish(message, connection=connection, queue=queue)
        OutboxMessage.objects.filter(pk=pk).update(
            sent_at=timezone.now(), attempts=F("attempts") + 1, last_error=""
        )
    return 1


def _publish(message: OutboxMessage, *, connection: Any, queue: str | None) -> None:
    options: dict[str, Any] = {"connection": connection, "retry": False}
    if queue:
        options["queue"] = queue
    kwargs = {**message.payload, "message_id": message.message_id, "event": message.event}
    _consumer().apply_async(kwargs=kwargs, **options)


def _record_failure(pk: int, exc: BaseException) -> None:
    logger.warning("outbox: publishing message %s failed, will retry: %r", pk, exc)
    OutboxMessage.objects.filter(pk=pk).update(
        attempts=F("attempts") + 1, last_error=repr(exc)[:1000]
    )


def _consumer() -> Any:
    """The consumer task, by its name (:mod:`orders.tasks` imports this module, not the
    reverse; ``OrdersConfig.ready`` registers it)."""
    return current_app.tasks[CONSUMER_TASK]


def outbox_purge_sent(
    *, older_than: datetime.timedelta = SENT_RETENTION, batch_size: int = 1000
) -> int:
    """Delete messages sent more than ``older_than`` ago, in short batches; how many.

    Only sent messages go: a pending one is kept however old it is (the broker may
    have been down for days; it still has to be published).
    """
    cutoff = timezone.now() - older_than
    deleted = 0
    while True:
        ids = list(
            OutboxMessage.objects.filter(sent_at__lt=cutoff)
            .order_by("pk")
            .values_list("pk", flat=True)[:batch_size]
        )
        if not ids:
            return deleted
        with transaction.atomic():
            count, _ = OutboxMessage.objects.filter(pk__in=ids, sent_at__lt=cutoff).delete()
        deleted += count
