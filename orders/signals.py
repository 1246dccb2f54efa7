"""Signals of the orders app: how apps that build on orders learn what happened to one.

The orders app imports no app above it (payments build on orders). What they must
do when an order changes, they do in receivers of these signals.
"""

from __future__ import annotations

from django.dispatch import Signal

#: Sent with ``order`` (now CANCELLED) inside the transaction that moved it from PAID,
#: before it commits. A receiver undoes the payment (the payments app refunds it); one
#: that cannot raises :class:`orders.errors.CancelRefused`, and the cancel rolls back.
order_paid_cancelled = Signal()
