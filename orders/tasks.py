"""Celery tasks of the orders app: the consumer of order events.

Brokers deliver at least once, and ``order.paid`` is published by every route
that pays an order (balance payments, gateway callbacks). The consumer counts
each paid order into :class:`~orders.models.DailySales` with ``F()`` increments,
which are not idempotent, so it is deduplicated by message id: the key
``msg_<message_id>_<consumer>`` is claimed before the work, and a redelivery of a
message that was handled returns the stored result without counting again.

With the database store the claim, the receipt, the counters and the stored
result commit in **one transaction** (``idempotency_mode="auto"``): a worker
that dies half-way leaves neither a counted sale without its key nor a key
without its sale, and a concurrent redelivery waits on the key's unique index
and then replays the result.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from idempotency.contrib.celery import IdempotentTask
from idempotency.observability import key_hash
from orders.outbox import CONSUMER_TASK, DEFAULT_BATCH_SIZE, outbox_purge_sent, outbox_relay
from orders.services import ORDER_PAID, order_paid_record

logger = logging.getLogger(__name__)

#: Name of this consumer in the message keys (each consumer of a message dedups alone).
SALES_CONSUMER = "orders.sales"


@shared_task(
    base=IdempotentTask,
    idempotency_mode="auto",
    name=CONSUMER_TASK,
    idempotency_key="msg_{message_id}_{consumer}",
    idempotency_scope="messages",
)
def order_event_consume(
    message_id: str, event: str, order_id: int, consumer: str = SALES_CONSUMER
) -> dict[str, Any]:
    """Handle one order event message, once per ``message_id`` (and consumer).

    ``order.paid``: write the order's receipt and count the sale. Other events,
    and orders that do not exist or were never paid, are acknowledged and ignored
    (retrying them would never succeed).
    """
    # a message id is key material: logs name it by its keyed hash, as the library does,
    # and the result (which Celery logs) leaves it out
    if event != ORDER_PAID:
        logger.info(
            "order event %s (%s) ignored: not handled by %s", key_hash(message_id), event, consumer
        )
        return {"handled": False}
    effects = order_paid_record(order_id=order_id)
    if effects is None:
        logger.warning(
            "order event %s ignored: order %s is not paid", key_hash(message_id), order_id
        )
        return {"handled": False}
    receipt, sales = effects
    return {
        "handled": True,
        "receipt_id": receipt.pk,
        "sales_date": sales.date.isoformat(),
    }


@shared_task(name="orders.relay_outbox", ignore_result=True)
def relay_outbox(batch_size: int = DEFAULT_BATCH_SIZE, max_batches: int = 10) -> dict[str, int]:
    """Celery beat task: publish pending outbox messages (``order.paid``), oldest first.

    Safe to run from several schedulers at once: each message is published under
    its row lock, skipped by any other relay. Stops early when the broker refuses
    a publish (the next run retries) or nothing is pending.
    """
    sent = failed = 0
    pending = 0
    for _ in range(max_batches):
        result = outbox_relay(batch_size=batch_size)
        sent, failed, pending = sent + result.sent, failed + result.failed, result.pending
        if result.failed or not result.sent:
            break
    return {"sent": sent, "failed": failed, "pending": pending}


@shared_task(name="orders.purge_sent_outbox", ignore_result=True)
def purge_sent_outbox() -> int:
    """Celery beat task: delete outbox messages sent more than a week ago (never pending)."""
    return outbox_purge_sent()
