"""``idempotency/tokens/redis.py``: a token is a Redis string named by its hash and holding
its binding, set once with the token's lifetime; one script consumes it, leaving a
tombstone under the same hash tag that answers "used" for at least a minute, and refuses a
foreign binding without consuming. On the Redis of ``REDIS_URL``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from idempotency.tokens import RedisTokens
from idempotency.tokens.base import INVALID, OK, TOMBSTONE_SECONDS, USED, hash_token
from tests.support.counting import unique

pytestmark = pytest.mark.redis


@pytest.fixture
def redis_tokens(redis_client: Any) -> Iterator[RedisTokens]:
    """Tokens under a key prefix of this test's own, their keys deleted at its end."""
    tokens = RedisTokens(key_prefix=unique("beyond-tokens"))
    yield tokens
    for key in redis_client.scan_iter(match=f"{tokens.key_prefix}:*"):
        redis_client.delete(key)


@pytest.fixture
def token_hash() -> str:
    return hash_token(unique("token"))


def test_the_token_and_its_tombstone_share_one_hash_tag(redis_tokens: RedisTokens) -> None:
    key, tombstone = redis_tokens.keys("f" * 64)
    assert key == redis_tokens.key_prefix + ":st:{" + "f" * 64 + "}"
    assert tombstone == key + ":used"
    assert RedisTokens.binding("auth.user:1", "checkout") == '["auth.user:1","checkout"]'


def test_issue_sets_the_binding_once_for_the_tokens_lifetime(
    redis_tokens: RedisTokens, token_hash: str, redis_client: Any
) -> None:
    before = timezone.now()
    expires_at = redis_tokens.issue(token_hash, "s", "checkout", 30.0)
    assert before + timedelta(seconds=30) <= expires_at <= timezone.now() + timedelta(seconds=30)
    key, _ = redis_tokens.keys(token_hash)
    assert json.loads(redis_client.get(key)) == ["s", "checkout"]
    assert 29_000 < redis_client.pttl(key) <= 30_000
    redis_tokens.issue(token_hash, "other", "checkout", 300.0)  # NX: never rebinds
    assert json.loads(redis_client.get(key)) == ["s", "checkout"]
    assert redis_client.pttl(key) <= 30_000


def test_consume_once_leaves_a_tombstone_and_a_foreign_binding_consumes_nothing(
    redis_tokens: RedisTokens, token_hash: str, redis_client: Any
) -> None:
    redis_tokens.issue(token_hash, "s", "checkout", 600.0)
    key, tombstone = redis_tokens.keys(token_hash)
    assert redis_tokens.consume(token_hash, "other", "checkout") == INVALID
    assert redis_tokens.consume(token_hash, "s", "other") == INVALID
    assert redis_client.exists(key) == 1 and redis_client.exists(tombstone) == 0
    assert redis_tokens.consume(token_hash, "s", "checkout") == OK
    assert redis_client.exists(key) == 0
    # kept as long as the token had left (ten minutes here), a minute at least
    assert 590_000 < redis_client.pttl(tombstone) <= 600_000
    assert redis_tokens.consume(token_hash, "s", "checkout") == USED
    assert redis_tokens.consume(token_hash, "other", "checkout") == INVALID


def test_a_token_about_to_expire_leaves_a_minute_long_tombstone(
    redis_tokens: RedisTokens, token_hash: str, redis_client: Any
) -> None:
    # 20 s left, a third of the tombstone's minute: no stall of the test process between
    # the issue and the consumption outlasts it (2 s could)
    redis_tokens.issue(token_hash, "s", "p", 20.0)
    consumed = time.monotonic()
    assert redis_tokens.consume(token_hash, "s", "p") == OK
    _, tombstone = redis_tokens.keys(token_hash)
    left = redis_client.pttl(tombstone)
    # the minute, less the time since the consumption (however long the process stalled)
    since = time.monotonic() - consumed
    assert (TOMBSTONE_SECONDS - since) * 1000 - 1 <= left <= TOMBSTONE_SECONDS * 1000
    assert redis_tokens.consume(hash_token("never issued"), "s", "p") == INVALID


def test_redis_tokens_expire_by_themselves_so_the_purge_deletes_nothing(
    redis_tokens: RedisTokens,
) -> None:
    assert redis_tokens.purge(now=timezone.now() + timedelta(days=1), batch_size=10) == 0
