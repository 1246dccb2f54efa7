"""Prometheus metrics: a storm of real requests, then a scrape of ``/metrics``.

Every count is checked against what the storm's responses said happened: fresh
201s, replays (``Idempotent-Replayed``), 409s, 422s, 400s. Counters are global to
the process, so the test compares a scrape before with one after.
"""

from __future__ import annotations

import uuid
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from idempotency import LockNotAcquired, lock
from idempotency.models import IdempotencyRecord, RecordState
from idempotency.stores.database import DatabaseStore, purge_expired_records
from tests.support.factories import OrderFactory, UserFactory, funded_account
from tests.support.stores import LOCK_BACKENDS, store_of
from tests.support.storms import run_threads

pytestmark = [pytest.mark.server_db, pytest.mark.django_db(transaction=True)]

ORDERS = "api/orders/"
PAY = "api/orders/<order_id:pk>/pay/"
DUPLICATES = 12

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: APIClient) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def outcomes(before: Samples, after: Samples, route: str) -> dict[str, float]:
    names = ["stored", "replayed", "conflict", "mismatch", "released", "invalid_key"]
    return {
        name: delta(
            before,
            after,
            "idempotency_outcomes_total",
            outcome=name,
            route=route,
            store="DatabaseStore" if name != "invalid_key" else "-",
        )
        for name in names
    }


def client_for(user: User) -> APIClient:
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(user=user)
    return client


def seen(response: Any) -> str:
    """What the response says happened to its request."""
    if response.status_code == 201:
        return "replayed" if response.get("Idempotent-Replayed") == "true" else "stored"
    return {400: "invalid_key", 409: "conflict", 422: "mismatch"}[response.status_code]


def test_a_storm_is_counted_exactly(settings: Any) -> None:
    assert settings.IDEMPOTENCY["METRICS"] is True  # the sample turns metrics on
    user = UserFactory()
    client = client_for(user)
    before = scrape(client)
    tally: Counter[str] = Counter()

    def create(key: str, request_id: str, amount: str = "5.00") -> Any:
        return client_for(user).post(
            "/api/orders/",
            {"request_id": request_id, "amount": amount},
            format="json",
            HTTP_IDEMPOTENCY_KEY=key,
        )

    keys = [f"storm-{uuid.uuid4()}" for _ in range(4)]
    for key in keys:
        for _attempt in range(3):  # the first and two retries
            tally[seen(create(key, key[:40]))] += 1
    tally[seen(create(keys[0], keys[0][:40], amount="6.00"))] += 1  # another body
    for bad in ["x" * 256, "caf\u00e9", ""]:
        tally[seen(create(bad, "r-bad"))] += 1
    # concurrent duplicates of one key, released together
    shared = f"storm-{uuid.uuid4()}"
    results = run_threads(DUPLICATES, lambda _i: create(shared, shared[:40]))
    for result in results:
        assert not isinstance(result, Exception), result
        tally[seen(result)] += 1
    after = scrape(client)

    counted = outcomes(before, after, ORDERS)
    assert tally["stored"] == 5 and tally["mismatch"] == 1 and tally["invalid_key"] == 3
    assert tally["replayed"] + tally["conflict"] == 8 + DUPLICATES - 1
    for name, value in counted.items():
        if name != "released":
            assert value == tally[name], (name, counted, tally)
    assert counted["released"] == 0
    # one claim-latency observation per request that reached the store
    observed = delta(before, after, "idempotency_claim_seconds_count", store="DatabaseStore")
    assert observed == sum(tally.values()) - tally["invalid_key"]
    # labels are bounded: no key, scope or user appears anywhere in the exposition
    exposition = client.get("/metrics").content.decode()
    assert shared not in exposition and keys[0] not in exposition
    assert f"user:{user.pk}" not in exposition  # auth.user:<pk> contains it too


def test_releases_tokens_and_locks_are_counted() -> None:
    user = UserFactory()
    client = client_for(user)
    funded_account("1.00", user=user)
    order = OrderFactory(user=user, amount=Decimal("50.00"))
    before = scrape(client)

    # not enough money: a transient 409, so the key is released for a retry
    response = client.post(
        f"/api/orders/{order.pk}/pay/",
        {"pay_no": "PAY-metrics-1"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="metrics-release",
    )
    assert response.status_code == 409
    # a one-time submit token presented twice
    token = client.post("/api/idempotency/tokens/", {"purpose": "order-form"}, format="json")
    for expected in (201, 409):
        response = client.post(
            "/api/orders/checkout/",
            {"amount": "3.00"},
            format="json",
            HTTP_X_SUBMIT_TOKEN=token.json()["token"],
        )
        assert response.status_code == expected
    # a lock held elsewhere
    backend = store_of(LOCK_BACKENDS["mysql" if connection.vendor == "mysql" else "postgres"])
    held, second = (lock("metrics-lock", backend=backend, wait=0) for _ in range(2))
    with held, pytest.raises(LockNotAcquired), second:
        pass
    after = scrape(client)

    assert outcomes(before, after, PAY)["released"] == 1
    assert (
        delta(
            before, after, "idempotency_outcomes_total", outcome="token_used", route="-", store="-"
        )
        == 1
    )
    lock_labels = {"outcome": "lock_not_acquired", "route": "-"}
    assert (
        sum(
            value - before.get(key, 0.0)
            for key, value in after.items()
            if key[0] == "idempotency_outcomes_total"
            and lock_labels.items() <= dict(key[1]).items()
        )
        == 1
    )


def test_the_purge_samples_the_records_in_progress() -> None:
    store = DatabaseStore()
    for number in range(3):
        claim = store.claim(
            "user:metrics",
            f"k-{number}",
            fingerprint="f" * 64,
            lease=60,
            ttl=600,
            method="POST",
            route="/api/orders/",
        )
        assert claim.owned
    purge_expired_records()
    in_progress = IdempotencyRecord.objects.filter(state=RecordState.IN_PROGRESS).count()
    assert in_progress == 3
    after = scrape(APIClient())
    assert after[("idempotency_in_progress_records", (("store", "DatabaseStore"),))] == in_progress
