"""Django Ninja operations under storms of concurrent duplicates, on PostgreSQL: one
execution per key (counted where no rollback can undo it), in atomic and lease mode,
sync and async, with session and bearer-token callers."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

from tests.support.stores import STORE_VARIANTS
from tests.support.storms import run_threads, succeeded
from tests.support.users import logged_in_client
from tests.testapp.executions import executions
from tests.testapp.models import Wallet

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DUPLICATES = 20
ROUNDS = 3

#: (url, the status of a first answer); async operations run in lease mode only
SYNC = ("/n/status/?sleep=0.05", 201)
ASYNC = ("/n/async/?sleep=0.05", 201)
CELLS = {
    "sync-db-atomic": ("db-atomic", SYNC),
    "sync-db-lease": ("db-lease", SYNC),
    "sync-redis": ("redis", SYNC),
    "sync-cache": ("cache", SYNC),
    "async-db-lease": ("db-lease", ASYNC),
    "async-redis": ("redis", ASYNC),
}


def fire(client_factory: Any, url: str, key: str) -> list[Any]:
    def one(_index: int) -> Any:
        client: Client = client_factory()
        client.raise_request_exception = False
        return client.post(
            url,
            data=json.dumps({"amount": 1}),
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=key,
        )

    return succeeded(run_threads(DUPLICATES, one))


def assert_once(responses: dict[str, list[Any]], log: Path, status: int, cell: str) -> None:
    ran = executions(log)
    for key, answers in responses.items():
        statuses = Counter(r.status_code for r in answers)
        assert ran[key] == 1, f"{cell}: the body ran {ran[key]} times for one key {statuses}"
        assert set(statuses) <= {status, 409}, f"{cell}: {statuses}"
        done = [r for r in answers if r.status_code == status]
        first = [r for r in done if "Idempotent-Replayed" not in r]
        assert len(first) == 1, f"{cell}: {len(first)} first answers"
        assert all(r.content == first[0].content for r in done), f"{cell}: a replay differs"


@pytest.mark.parametrize(
    "cell",
    [pytest.param(c, marks=[pytest.mark.redis] if "redis" in c else []) for c in CELLS],
)
def test_concurrent_duplicates_run_an_operation_once(
    user: Any, wallet: Wallet, execution_log: Path, cell: str
) -> None:
    variant, (url, status) = CELLS[cell]
    responses: dict[str, list[Any]] = {}
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[variant]):
        for _round in range(ROUNDS):
            key = str(uuid.uuid4())
            responses[key] = fire(lambda: logged_in_client(user), url, key)
    assert_once(responses, execution_log, status, cell)
    assert Wallet.objects.get().balance == 1000 - ROUNDS


@pytest.mark.parametrize("variant", ["db-atomic", "db-lease"])
def test_two_bearer_tokens_storming_one_key_each_run_once(
    wallet: Wallet, execution_log: Path, variant: str
) -> None:
    """Half the duplicates carry token-a, half token-b, all with one key: two scopes, so
    two executions, and no caller ever receives the other token's response."""
    key = str(uuid.uuid4())
    tokens = ["token-a", "token-b"] * (DUPLICATES // 2)

    def one(index: int) -> Any:
        client = Client(HTTP_AUTHORIZATION=f"Bearer {tokens[index]}")
        client.raise_request_exception = False
        return client.post(
            SYNC[0],
            data=b'{"amount": 1}',
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=key,
        )

    with override_settings(IDEMPOTENCY=STORE_VARIANTS[variant]):
        answers = succeeded(run_threads(len(tokens), one))
    assert executions(execution_log)[key] == 2
    by_token: dict[str, set[bytes]] = {}
    for token, answer in zip(tokens, answers, strict=True):
        assert answer.status_code in (201, 409), answer.status_code
        if answer.status_code == 201:
            by_token.setdefault(token, set()).add(answer.content)
    assert all(len(bodies) == 1 for bodies in by_token.values()), by_token
    assert by_token["token-a"] != by_token["token-b"]
    assert Wallet.objects.get().balance == 1000 - 2
