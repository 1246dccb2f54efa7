"""DatabaseStore judges leases and expiry by the PostgreSQL server's clock.

An application server whose clock runs an hour ahead must neither take over a
live lease nor treat a live record as expired; one whose clock runs behind must
not keep an expired one alive. The skew is made by replacing the store module's
view of the application clock (``timezone.now``): the database's clock is real.
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.utils import timezone

from idempotency.stores.base import ClaimStatus, StoredResponse
from idempotency.stores.database import DatabaseStore
from tests.support.clocks import age

pytestmark = [pytest.mark.server_db, pytest.mark.django_db(transaction=True)]

RESPONSE = StoredResponse(201, [("Content-Type", "application/json")], b'{"ok": true}')


def skew(monkeypatch: pytest.MonkeyPatch, delta: timedelta) -> None:
    from idempotency.stores import database

    clock = SimpleNamespace(now=lambda: timezone.now() + delta)
    monkeypatch.setattr(database, "timezone", clock)


@pytest.mark.parametrize(
    "delta", [timedelta(hours=1), timedelta(hours=-1)], ids=["ahead", "behind"]
)
def test_a_skewed_application_clock_never_takes_over_a_live_lease(
    monkeypatch: pytest.MonkeyPatch, delta: timedelta
) -> None:
    store = DatabaseStore()
    owner = store.claim("user:1", "live", fingerprint="fp", lease=30, ttl=120)
    assert owner.owned
    skew(monkeypatch, delta)
    other = store.claim("user:1", "live", fingerprint="fp", lease=30, ttl=120)
    assert other.status is ClaimStatus.IN_PROGRESS
    assert 25 < other.retry_after <= 30
    seen = store.lookup("user:1", "live", fingerprint="fp")
    assert seen is not None and seen.status is ClaimStatus.IN_PROGRESS
    assert store.complete("user:1", "live", fence=owner.fence, response=RESPONSE, ttl=120)
    done = store.lookup("user:1", "live", fingerprint="fp")
    assert done is not None and done.status is ClaimStatus.COMPLETED


def test_expiry_is_the_servers_too(monkeypatch: pytest.MonkeyPatch) -> None:
    store = DatabaseStore()
    assert store.insert_completed("user:1", "done", fingerprint="fp", response=RESPONSE, ttl=60)
    skew(monkeypatch, timedelta(hours=2))  # past the TTL by the application's clock only
    seen = store.lookup("user:1", "done", fingerprint="fp")
    assert seen is not None and seen.status is ClaimStatus.COMPLETED
    again: Any = store.claim("user:1", "done", fingerprint="fp", lease=30, ttl=60)
    assert again.status is ClaimStatus.COMPLETED  # not re-claimed as if expired


def test_an_expired_lease_is_taken_over_by_the_servers_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = DatabaseStore()
    assert store.claim("user:1", "dead", fingerprint="fp", lease=0.2, ttl=60).owned
    skew(monkeypatch, timedelta(hours=-1))  # the application thinks no time passed at all
    age(store, "user:1", "dead", 1)  # a second passes on the server's clock
    assert store.claim("user:1", "dead", fingerprint="fp", lease=30, ttl=60).owned


def test_the_purge_judges_expiry_by_the_servers_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    from idempotency.models import IdempotencyRecord
    from idempotency.stores import database

    store = DatabaseStore()
    assert store.insert_completed("user:1", "kept", fingerprint="fp", response=RESPONSE, ttl=60)
    skew(monkeypatch, timedelta(hours=2))
    assert database.purge_expired_records().deleted == 0
    assert IdempotencyRecord.objects.filter(key="kept").exists()
