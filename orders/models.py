"""Orders: created once per client request id, moved along a fixed status table."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class OrderStatus(models.TextChoices):
    CREATED = "CREATED", _("Created")
    PAID = "PAID", _("Paid")
    SHIPPED = "SHIPPED", _("Shipped")
    COMPLETED = "COMPLETED", _("Completed")
    CANCELLED = "CANCELLED", _("Cancelled")


#: The allowed moves: status -> the statuses it may move to.
ORDER_TRANSITIONS: dict[str, frozenset[str]] = {
    OrderStatus.CREATED: frozenset({OrderStatus.PAID, OrderStatus.CANCELLED}),
    OrderStatus.PAID: frozenset({OrderStatus.SHIPPED, OrderStatus.CANCELLED}),
    OrderStatus.SHIPPED: frozenset({OrderStatus.COMPLETED}),
    OrderStatus.COMPLETED: frozenset(),
    OrderStatus.CANCELLED: frozenset(),
}


def can_transition(from_status: str, to_status: str) -> bool:
    """Whether an order in ``from_status`` may move to ``to_status``."""
    return to_status in ORDER_TRANSITIONS.get(from_status, frozenset())


def transition_sources(to_status: str) -> frozenset[str]:
    """Every status from which an order may move to ``to_status``."""
    return frozenset(s for s, targets in ORDER_TRANSITIONS.items() if to_status in targets)


class Order(models.Model):
    request_id = models.CharField(
        _("request id"),
        max_length=64,
        help_text=_(
            "Chosen by the client, unique per user; a repeat with the same id returns the "
            "same order. Another user's ids are invisible: each user has their own."
        ),
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="orders",
        verbose_name=_("user"),
    )
    amount = models.DecimalField(_("amount"), max_digits=12, decimal_places=2)
    status = models.CharField(
        _("status"),
        max_length=16,
        choices=OrderStatus.choices,
        default=OrderStatus.CREATED,
        db_index=True,
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    paid_at = models.DateTimeField(_("paid at"), null=True, blank=True)

    class Meta:
        verbose_name = _("order")
        verbose_name_plural = _("orders")
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(amount__gt=Decimal("0")),
                name="orders_order_amount_positive",
            ),
            models.UniqueConstraint(
                fields=["user", "request_id"],
                name="orders_order_unique_request_id_per_user",
            ),
        ]

    def __str__(self) -> str:
        return f"Order {self.pk} ({self.request_id}): {self.amount} {self.status}"


class Receipt(models.Model):
    """The receipt of a paid order, written by the ``order.paid`` consumer (one per order)."""

    order = models.OneToOneField(
        Order,
        on_delete=models.PROTECT,
        related_name="receipt",
        verbose_name=_("order"),
    )
    amount = models.DecimalField(_("amount"), max_digits=12, decimal_places=2)
    paid_at = models.DateTimeField(_("paid at"))
    issued_at = models.DateTimeField(_("issued at"), auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = _("receipt")
        verbose_name_plural = _("receipts")
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"Receipt of order {self.order_id}: {self.amount}"


class DailySales(models.Model):
    """Paid orders and their total per day (UTC), counted by the ``order.paid`` consumer.

    The counters are incremented with ``F()`` expressions: a *non-idempotent*
    effect, so every ``order.paid`` message must be counted exactly once. The
    consumer's message-id key is what guarantees it.
    """

    date = models.DateField(_("date"), unique=True)
    orders = models.PositiveIntegerField(_("orders"), default=0)
    total = models.DecimalField(
        _("total"), max_digits=14, decimal_places=2, default=Decimal("0.00")
    )
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("daily sales")
        verbose_name_plural = _("daily sales")
        ordering = ["-date"]

    def __str__(self) -> str:
        return f"Sales of {self.date}: {self.orders} order(s), {self.total}"


class OutboxMessage(models.Model):
    """An event written in the transaction of the change it announces (transactional outbox).

    The payment's transaction inserts it, so it exists exactly when the payment
    committed; the relay (:mod:`orders.outbox`) publishes it to the broker at least
    once and then sets ``sent_at``. Consumers deduplicate by ``message_id``.
    """

    message_id = models.CharField(_("message id"), max_length=128, unique=True)
    event = models.CharField(_("event"), max_length=64)
    payload = models.JSONField(_("payload"), default=dict)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    sent_at = models.DateTimeField(_("sent at"), null=True, blank=True)
    attempts = models.PositiveIntegerField(_("publish attempts"), default=0)
    last_error = models.TextField(_("last error"), blank=True, default="")

    class Meta:
        verbose_name = _("outbox message")
        verbose_name_plural = _("outbox messages")
        ordering = ["id"]
        indexes = [
            models.Index(
                fields=["id"],
                condition=models.Q(sent_at__isnull=True),
                name="orders_outbox_pending_idx",
            ),
        ]

    def __str__(self) -> str:
        state = "sent" if self.sent_at else "pending"
        return f"{self.event} {self.message_id} ({state})"
