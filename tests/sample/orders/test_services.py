"""Services of the orders app: one order per request id, moves along the status table."""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

import pytest

from accounts.money import InvalidAmount
from orders import services
from orders.errors import IllegalTransition, InvalidRequestId, OrderNotFound, OrderRequestConflict
from orders.models import Order, OrderStatus, can_transition, transition_sources
from orders.services import (
    order_cancel,
    order_complete,
    order_create,
    order_ship,
    order_transition,
)
from tests.support.factories import OrderFactory, UserFactory

ALLOWED = {
    ("CREATED", "PAID"),
    ("CREATED", "CANCELLED"),
    ("PAID", "SHIPPED"),
    ("PAID", "CANCELLED"),
    ("SHIPPED", "COMPLETED"),
}


@pytest.mark.parametrize(
    ("from_status", "to_status"), list(itertools.product(OrderStatus.values, repeat=2))
)
def test_transition_table(from_status: str, to_status: str) -> None:
    assert can_transition(from_status, to_status) is ((from_status, to_status) in ALLOWED)
    assert (from_status in transition_sources(to_status)) is ((from_status, to_status) in ALLOWED)


def test_unknown_status_cannot_move() -> None:
    assert can_transition("LOST", OrderStatus.PAID) is False


@pytest.mark.django_db
class TestOrderCreate:
    def test_creates_an_order(self) -> None:
        user = UserFactory()
        order, created = order_create(user=user, request_id="req-1", amount=Decimal("12.30"))
        assert created is True
        assert order.pk is not None
        assert (order.user_id, order.amount, order.status) == (user.pk, Decimal("12.30"), "CREATED")
        assert order.paid_at is None

    def test_repeat_returns_the_same_order(self) -> None:
        user = UserFactory()
        first, _ = order_create(user=user, request_id="req-1", amount=Decimal("12.30"))
        again, created = order_create(user=user, request_id="req-1", amount=Decimal("12.3"))
        assert created is False
        assert again.pk == first.pk
        assert (again.created_at, again.updated_at) == (first.created_at, first.updated_at)
        assert Order.objects.count() == 1

    def test_request_id_with_another_amount_is_a_conflict(self) -> None:
        user = UserFactory()
        order_create(user=user, request_id="req-1", amount=Decimal("12.30"))
        with pytest.raises(OrderRequestConflict):
            order_create(user=user, request_id="req-1", amount=Decimal("12.31"))
        assert Order.objects.count() == 1

    def test_request_ids_are_per_user(self) -> None:
        theirs, _ = order_create(user=UserFactory(), request_id="req-1", amount=Decimal("12.30"))
        mine, created = order_create(user=UserFactory(), request_id="req-1", amount=Decimal("1.00"))
        assert created is True
        assert mine.pk != theirs.pk
        assert Order.objects.count() == 2

    def test_unique_index_decides_a_race(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The other request's order, invisible to our look-up, wins at the insert."""
        user = UserFactory()
        first, _ = order_create(user=user, request_id="race", amount=Decimal("5.00"))
        real_lookup = services._order_by_request_id
        calls: list[str] = []

        def miss_once(*, user: Any, request_id: str) -> Order | None:
            calls.append(request_id)
            return None if len(calls) == 1 else real_lookup(user=user, request_id=request_id)

        monkeypatch.setattr(services, "_order_by_request_id", miss_once)
        again, created = order_create(user=user, request_id="race", amount=Decimal("5.00"))
        assert len(calls) == 2
        assert created is False
        assert again.pk == first.pk
        assert Order.objects.count() == 1

    @pytest.mark.parametrize(
        "request_id", ["", "x" * 65, "has space", "ünï", "nul\x00", "a/b", "a\n", None, 5]
    )
    def test_invalid_request_ids_are_rejected(self, request_id: Any) -> None:
        with pytest.raises(InvalidRequestId):
            order_create(user=UserFactory(), request_id=request_id, amount=Decimal("1.00"))
        assert Order.objects.count() == 0

    def test_longest_request_id_is_accepted(self) -> None:
        request_id = "A-z_0.9:" * 8
        order, _ = order_create(user=UserFactory(), request_id=request_id, amount=Decimal("1"))
        assert order.request_id == request_id

    @pytest.mark.parametrize("amount", [Decimal("0"), Decimal("-5"), Decimal("0.001"), 1.0])
    def test_invalid_amounts_are_rejected(self, amount: Any) -> None:
        with pytest.raises(InvalidAmount):
            order_create(user=UserFactory(), request_id="req", amount=amount)


@pytest.mark.django_db
class TestOrderTransition:
    def test_moves_along_the_table(self) -> None:
        order = OrderFactory()
        before = order.updated_at
        paid = order_transition(order_id=order.pk, to=OrderStatus.PAID)
        assert paid.status == OrderStatus.PAID
        assert paid.paid_at is not None
        assert paid.updated_at > before
        assert order_ship(order_id=order.pk).status == OrderStatus.SHIPPED
        assert order_complete(order_id=order.pk).status == OrderStatus.COMPLETED

    def test_repeat_of_a_done_move_answers_like_the_first(self) -> None:
        order = OrderFactory()
        first = order_cancel(order_id=order.pk)
        again = order_cancel(order_id=order.pk)
        assert again.status == OrderStatus.CANCELLED
        assert again.updated_at == first.updated_at

    def test_illegal_move_raises_and_changes_nothing(self) -> None:
        order = OrderFactory(status=OrderStatus.CREATED)
        with pytest.raises(IllegalTransition) as excinfo:
            order_ship(order_id=order.pk)
        assert (excinfo.value.current, excinfo.value.to) == ("CREATED", "SHIPPED")
        order.refresh_from_db()
        assert order.status == OrderStatus.CREATED

    @pytest.mark.parametrize("status", ["COMPLETED", "CANCELLED"])
    def test_final_statuses_do_not_move(self, status: str) -> None:
        order = OrderFactory(status=status)
        for target in set(OrderStatus.values) - {status}:
            with pytest.raises(IllegalTransition):
                order_transition(order_id=order.pk, to=target)

    def test_cancel_of_a_shipped_order_is_illegal(self) -> None:
        order = OrderFactory(status=OrderStatus.SHIPPED)
        with pytest.raises(IllegalTransition):
            order_cancel(order_id=order.pk)

    def test_without_repeats_a_done_move_is_illegal(self) -> None:
        order = OrderFactory(status=OrderStatus.PAID)
        with pytest.raises(IllegalTransition):
            order_transition(order_id=order.pk, to=OrderStatus.PAID, allow_repeat=False)

    def test_expected_from_narrows_the_sources(self) -> None:
        order = OrderFactory(status=OrderStatus.PAID)
        with pytest.raises(IllegalTransition):
            order_transition(
                order_id=order.pk, to=OrderStatus.CANCELLED, expected_from={OrderStatus.CREATED}
            )
        order.refresh_from_db()
        assert order.status == OrderStatus.PAID

    def test_unknown_order_raises(self) -> None:
        with pytest.raises(OrderNotFound):
            order_cancel(order_id=987654)

    def test_unknown_status_raises(self) -> None:
        order = OrderFactory()
        with pytest.raises(ValueError):
            order_transition(order_id=order.pk, to="LOST")
