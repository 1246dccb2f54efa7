"""Admin of the sample apps: every page renders; audit trails are read-only."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from accounts.models import LedgerEntry
from orders.models import OrderStatus, OutboxMessage
from payments.models import PaymentRecord
from payments.services import payment_pay
from tests.support.factories import OrderFactory, UserFactory, funded_account

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(db: None) -> Client:
    client = Client()
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def paid(db: None) -> PaymentRecord:
    account = funded_account("50.00")
    order = OrderFactory(user=account.user, amount=Decimal("20.00"))
    record, _ = payment_pay(user=account.user, order_id=order.pk, pay_no="P-1")
    return record


@pytest.mark.parametrize(
    "model", ["accounts_account", "accounts_ledgerentry", "orders_order", "payments_paymentrecord"]
)
def test_changelist_search_and_change_pages_render(
    admin_client: Client, paid: PaymentRecord, model: str
) -> None:
    changelist = reverse(f"admin:{model}_changelist")
    assert admin_client.get(changelist).status_code == 200
    assert admin_client.get(changelist, {"q": "P-1"}).status_code == 200
    obj_pk = {
        "accounts_account": paid.user.account.pk,
        "accounts_ledgerentry": LedgerEntry.objects.get(reference="pay_P-1").pk,
        "orders_order": paid.order_id,
        "payments_paymentrecord": paid.pk,
    }[model]
    assert admin_client.get(reverse(f"admin:{model}_change", args=[obj_pk])).status_code == 200


@pytest.mark.parametrize(
    "model", ["accounts_ledgerentry", "orders_order", "payments_paymentrecord"]
)
def test_audit_trails_cannot_be_added_to(admin_client: Client, model: str) -> None:
    assert admin_client.get(reverse(f"admin:{model}_add")).status_code == 403


def test_balance_is_read_only_in_the_admin(admin_client: Client, paid: PaymentRecord) -> None:
    account = paid.user.account
    url = reverse("admin:accounts_account_change", args=[account.pk])
    response = admin_client.post(url, {"balance": "999999.00", "version": "0"})
    account.refresh_from_db()
    assert response.status_code in {200, 302}
    assert (account.balance, account.version) == (Decimal("30.00"), 2)


def test_bulk_actions_follow_the_status_table(admin_client: Client, user: User) -> None:
    created = OrderFactory(user=user)
    shipped = OrderFactory(user=user, status=OrderStatus.SHIPPED)
    response = admin_client.post(
        reverse("admin:orders_order_changelist"),
        {"action": "cancel_orders", "_selected_action": [created.pk, shipped.pk]},
        follow=True,
    )
    assert response.status_code == 200
    messages = [str(m) for m in response.context["messages"]]
    assert "1 order(s) moved to CANCELLED." in messages
    assert "1 order(s) cannot move to CANCELLED." in messages
    created.refresh_from_db()
    shipped.refresh_from_db()
    assert (created.status, shipped.status) == (OrderStatus.CANCELLED, OrderStatus.SHIPPED)


def test_the_admin_cancel_of_a_paid_order_refunds_it(admin_client: Client, user: User) -> None:
    account = funded_account("100.00", user=user)
    order = OrderFactory(user=user, amount=Decimal("40.00"))
    payment_pay(user=user, order_id=order.pk, pay_no="P-1")
    admin_client.post(
        reverse("admin:orders_order_changelist"),
        {"action": "cancel_orders", "_selected_action": [order.pk]},
    )
    order.refresh_from_db()
    account.refresh_from_db()
    assert (order.status, account.balance) == (OrderStatus.CANCELLED, Decimal("100.00"))


def test_the_outbox_is_listed_read_only(admin_client: Client, user: User) -> None:
    OutboxMessage.objects.create(message_id="order.paid:1", event="order.paid")
    response = admin_client.get(reverse("admin:orders_outboxmessage_changelist"))
    assert response.status_code == 200
    assert b"order.paid:1" in response.content
