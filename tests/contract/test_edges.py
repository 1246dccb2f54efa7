"""Small edges of the core contract: which errors are "in progress", when "released" fires."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client, override_settings

from idempotency import signals
from tests.support.http import post
from tests.support.stores import STORE_VARIANTS
from tests.testapp.models import Effect, Wallet


@pytest.fixture
def released() -> Any:
    seen: list[dict[str, Any]] = []

    def receive(sender: Any, **kwargs: Any) -> None:
        seen.append(kwargs)

    signals.released.connect(receive)
    yield seen
    signals.released.disconnect(receive)


@pytest.mark.django_db(transaction=True)
def test_released_fires_only_when_the_key_is_released(
    client_a: Client, wallet: Wallet, store_variant: str, released: list[dict[str, Any]]
) -> None:
    client_a.raise_request_exception = False
    # a definitive 4xx the view raised is stored, not released
    assert post(client_a, "/t/api/", body='{"invalid": 1}', key="k-invalid").status_code == 400
    assert released == []
    assert post(client_a, "/t/api/", body='{"invalid": 1}', key="k-invalid")["Idempotent-Replayed"]
    # a 201 is stored
    assert post(client_a, "/t/api/", key="k-ok").status_code == 201
    assert released == []
    # a 500 and an exception are released, once each
    assert post(client_a, "/t/outcome/?status=503", key="k-503").status_code == 503
    assert post(client_a, "/t/outcome/?raise=1", key="k-raise").status_code == 500
    assert [r["key"] for r in released] == ["k-503", "k-raise"]


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("variant", ["db-atomic", "db-lease"])
def test_a_lock_error_on_the_views_own_rows_is_not_in_progress(
    client_a: Client, wallet: Wallet, variant: str
) -> None:
    """Only a wait on the claim answers 409 in-progress; the view's own lock failure is
    the view's error (a 500 here), and its key is released for the retry."""
    holding, done = threading.Event(), threading.Event()

    def hold_the_wallet() -> None:
        try:
            with transaction.atomic():
                Wallet.objects.select_for_update().get(pk=1)
                holding.set()
                done.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_wallet)
    holder.start()
    assert holding.wait(10)
    client_a.raise_request_exception = False
    try:
        with override_settings(IDEMPOTENCY={**STORE_VARIANTS[variant], "LOCK_TIMEOUT": 0.5}):
            locked = post(client_a, "/t/locking/", key="k-lock")
    finally:
        done.set()
        holder.join()
    assert locked.status_code == 500
    assert b"idempotency-request-in-progress" not in locked.content
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[variant]):
        retry = post(client_a, "/t/locking/", key="k-lock")
    assert retry.status_code == 201
    assert Effect.objects.count() == 1
