"""The sample's deposit under real Redis faults (lease mode, ``RedisStore``).

An effect in the application's database cannot commit together with a record in
Redis. These tests reproduce the two ways the record goes missing after the effect
committed, against a private Redis that is frozen, killed and restarted, and show that
the deposit still credits once: its ledger reference derives from the idempotency key.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from accounts import apis
from accounts.models import Account, LedgerEntry
from chaos.services import PrivateRedis
from tests.support.faults import caches_with, private_redis
from tests.support.stores import REDIS_STORE, using

pytestmark = pytest.mark.django_db(transaction=True)

DEPOSIT = "/api/accounts/me/deposit/"
RETRYABLE = {409, 500, 502, 503, 504}


@contextmanager
def redis_store(*, aof: bool, lease: float = 2.0) -> Iterator[PrivateRedis]:
    with (
        private_redis(aof=aof) as server,
        override_settings(
            CACHES=caches_with("private", server.url),
            IDEMPOTENCY={
                **using(REDIS_STORE, cache="private"),
                "LEASE": lease,
            },
        ),
    ):
        yield server


def deposit(client: APIClient, key: str, amount: str = "10.00") -> Any:
    return client.post(DEPOSIT, {"amount": amount}, format="json", HTTP_IDEMPOTENCY_KEY=key)


def retrying_deposit(client: APIClient, key: str, deadline: float = 20.0) -> Any:
    """A client that retries on 409 and 5xx, honouring Retry-After, within a deadline."""
    stop = time.monotonic() + deadline
    while True:
        response = deposit(client, key)
        if response.status_code not in RETRYABLE or time.monotonic() > stop:
            return response
        # real time: a client honouring a real server's Retry-After
        time.sleep(min(float(response.get("Retry-After", "0.2")), 1.0))


def freeze_during_first_deposit(monkeypatch: pytest.MonkeyPatch, server: PrivateRedis) -> list[int]:
    """Fault injection: SIGSTOP Redis right after the claim, before the deposit commits."""
    original: Callable[..., Any] = apis.account_deposit
    calls: list[int] = []

    def deposit_with_redis_frozen(**kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            server.freeze()
        return original(**kwargs)

    monkeypatch.setattr(apis, "account_deposit", deposit_with_redis_frozen)
    return calls


def credits(user: Any) -> tuple[int, Decimal]:
    account = Account.objects.get(user=user)
    return LedgerEntry.objects.filter(account=account).count(), account.balance


def test_crash_between_effect_and_record_credits_once(
    api_client: APIClient, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's recipe: Redis with AOF is frozen right after the claim; the deposit
    commits; Redis is killed and restarted (the claim survives, in progress); the
    client's retries get 503/409 until the lease runs out, then the retry takes the key
    over and runs the view again: the ledger's reference stops the second credit."""
    with redis_store(aof=True) as server:
        calls = freeze_during_first_deposit(monkeypatch, server)
        key = str(uuid.uuid4())
        first = deposit(api_client, key)  # the record cannot be written: Redis is frozen
        server.kill()
        server.start()
        retry = retrying_deposit(api_client, key)
    assert first.status_code == 201
    assert retry.status_code == 201
    assert len(calls) == 2  # the view ran again after the takeover ...
    assert credits(user) == (1, Decimal("10.00"))  # ... and credited nothing
    assert json.loads(retry.content) == json.loads(first.content)


def test_redis_that_forgets_does_not_credit_twice(api_client: APIClient, user: Any) -> None:
    """No persistence: a restart loses the completed record, the retry runs the view
    again as a first request, and the key-derived reference answers the first entry."""
    with redis_store(aof=False) as server:
        key = str(uuid.uuid4())
        first = deposit(api_client, key)
        server.kill()
        server.start()
        retry = retrying_deposit(api_client, key)
    assert first.status_code == retry.status_code == 201
    assert "Idempotent-Replayed" not in retry  # the record was gone: the view ran again
    assert retry.content == first.content
    assert credits(user) == (1, Decimal("10.00"))


def test_redis_restart_with_aof_keeps_every_record(api_client: APIClient, user: Any) -> None:
    with redis_store(aof=True) as server:
        keys = [str(uuid.uuid4()) for _ in range(10)]
        firsts = [deposit(api_client, key) for key in keys]
        server.kill()  # SIGKILL: no shutdown save; AOF (appendfsync always) has it all
        server.start()
        replays = [retrying_deposit(api_client, key) for key in keys]
    assert {r.status_code for r in firsts} == {201}
    assert [r.status_code for r in replays] == [201] * 10
    assert all(r["Idempotent-Replayed"] == "true" for r in replays)
    assert [r.content for r in replays] == [r.content for r in firsts]
    assert credits(user) == (10, Decimal("100.00"))


def test_a_client_reference_still_wins(api_client: APIClient, user: Any) -> None:
    response = api_client.post(DEPOSIT, {"amount": "5.00", "reference": "inv-7"}, format="json")
    assert response.status_code == 201
    assert json.loads(response.content)["reference"] == "inv-7"
