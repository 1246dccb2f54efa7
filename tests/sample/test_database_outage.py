"""The sample's own database lost under a request: a 503 problem, never a 500.

The 30-minute soak (docs/explanation/reliability.md) ended the sample's database
sessions every 40 s (``pg_terminate_backend``) and saw 85 answers 500: the sample's views
and DRF's token authentication met the dead session in their own queries, and the error
went through the library (which released the key: a 5xx is never stored) to DRF as an
unhandled exception. The sample's exception handler (``config/problems.py``) now answers
a database outage 503 ``database-unavailable`` with ``Retry-After``. Two of those 500s
came after the payment had committed: the outbox relay's ``on_commit`` hook (robust)
failed, and Django's log line for it read the ``__qualname__`` a ``functools.partial``
lacks (``orders/services.py`` now registers a function).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from django.db import connection, transaction
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

import orders.services
from orders.services import order_paid_publish
from tests.support.factories import OrderFactory
from tests.testapp.edge_views import terminate_own_session

DEPOSIT = "/api/accounts/me/deposit/"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_database_session_ended_under_a_request_is_a_503_problem(user: Any) -> None:
    token = Token.objects.create(user=user)
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    key = str(uuid.uuid4())
    terminate_own_session()
    try:
        # token authentication's query is the first to meet the dead session
        response = client.post(
            DEPOSIT, {"amount": "5", "reference": "d-1"}, format="json", HTTP_IDEMPOTENCY_KEY=key
        )
    finally:
        connection.close()
    assert response.status_code == 503, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert int(response["Retry-After"]) >= 1
    assert response.json()["code"] == "database-unavailable"
    # nothing ran and nothing was kept: the retry with the same key runs it, once
    retry = client.post(
        DEPOSIT, {"amount": "5", "reference": "d-1"}, format="json", HTTP_IDEMPOTENCY_KEY=key
    )
    assert retry.status_code == 201, retry.content
    assert retry.json()["balance_after"] == "5.00"


@pytest.mark.django_db(transaction=True)
def test_a_failing_outbox_relay_after_the_commit_is_logged_not_raised(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The relay's fast path fails after the payment committed (its session ended, the
    broker down): the hook's error is logged by name, and the caller gets no exception
    (under a partial, Django's log line itself raised AttributeError: a 500)."""

    def broken_relay(**kwargs: Any) -> int:
        raise RuntimeError("the broker refused the message")

    monkeypatch.setattr(orders.services, "outbox_relay", broken_relay)
    order = OrderFactory()
    with caplog.at_level(logging.ERROR, logger="django.db.backends"), transaction.atomic():
        order_paid_publish(order_id=order.pk)
    assert any(
        "order_paid_publish.<locals>.relay" in record.getMessage() for record in caplog.records
    ), [record.getMessage() for record in caplog.records]
