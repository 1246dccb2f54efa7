"""Time in the HTTP contract: an expired record runs again, a request in progress answers
409 with Retry-After, or a waiting duplicate replays once the first completes."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings

from idempotency.stores.base import get_store
from idempotency.utils.backoff import Backoff
from tests.support.http import new_key, post
from tests.testapp.models import Effect, Wallet
from tests.testapp.views import Gate

pytestmark = pytest.mark.django_db(transaction=True)


def test_expired_record_runs_again(
    client_a: Client, wallet: Wallet, age_records: Callable[[str, float], None]
) -> None:
    key = new_key()
    with override_settings(IDEMPOTENCY={"TTL": 60}):
        post(client_a, "/t/api/", key=key)
        age_records(key, 61)
        again = post(client_a, "/t/api/", key=key)
    assert "Idempotent-Replayed" not in again
    assert Effect.objects.count() == 2


def _claim_in_progress(client: Client, url: str, key: str, body: Any, lease: float = 30) -> None:
    """Claim the key as if a first request were still running."""
    from django.test import RequestFactory

    from idempotency.http.fingerprints import request_fingerprint

    request = RequestFactory().post(url, data=json.dumps(body), content_type="application/json")
    scope = f"auth.user:{client.session['_auth_user_id']}"
    get_store().claim(scope, key, fingerprint=request_fingerprint(request), lease=lease, ttl=60)


def test_in_progress_answers_409_with_retry_after(client_a: Client, wallet: Wallet) -> None:
    key = new_key()
    with override_settings(IDEMPOTENCY={"MODE": "lease"}):
        _claim_in_progress(client_a, "/t/api/", key, {"amount": 5})
        response = post(client_a, "/t/api/", body={"amount": 5}, key=key)
    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content)["code"] == "idempotency-request-in-progress"
    assert int(response["Retry-After"]) >= 1
    assert Effect.objects.count() == 0


@pytest.mark.server_db
def test_wait_replays_once_the_first_completes(
    client_a: Client, wallet: Wallet, gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    waiting = threading.Event()
    next_pause = Backoff.next_pause

    def noted_pause(self: Backoff) -> float | None:
        waiting.set()  # the duplicate found the first in progress and waits for it
        return next_pause(self)

    monkeypatch.setattr(Backoff, "next_pause", noted_pause)
    key = new_key()
    results: dict[str, Any] = {}

    def call(name: str) -> None:
        try:
            results[name] = post(client_a, "/t/api/?hold=1", key=key)
        finally:
            connection.close()

    with override_settings(IDEMPOTENCY={"MODE": "lease", "WAIT": 30}):
        first = threading.Thread(target=call, args=("first",))
        first.start()
        assert gate.entered.wait(30)  # the first has claimed the key and runs its body
        second = threading.Thread(target=call, args=("waited",))
        second.start()
        assert waiting.wait(30)
        gate.release.set()
        first.join(30)
        second.join(30)
    waited = results["waited"]
    assert results["first"].status_code == waited.status_code == 201
    assert waited["Idempotent-Replayed"] == "true"
    assert waited.content == results["first"].content
    assert Effect.objects.count() == 1
