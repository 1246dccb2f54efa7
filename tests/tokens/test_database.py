"""``idempotency/tokens/database.py``: a token is a ``SubmitToken`` row holding its hash;
consuming it is one conditional ``UPDATE`` (of concurrent consumers exactly one wins), a
consumed row answers "used" while it is unexpired or a minute old, and the purge deletes
expired rows and tombstones past that minute. On the database of the run (the race on a
server database)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from idempotency.models import SubmitToken
from idempotency.tokens import DatabaseTokens
from idempotency.tokens.base import INVALID, OK, TOMBSTONE_SECONDS, USED, hash_token
from tests.support.storms import Overlap, run_threads, succeeded

pytestmark = pytest.mark.django_db

HASH = "a" * 64


@pytest.fixture
def tokens() -> DatabaseTokens:
    return DatabaseTokens()


def move(**delta: timedelta) -> None:
    """Move the row's timestamps into the past, as if that time had passed."""
    row = SubmitToken.objects.get(token_hash=HASH)
    for field, by in delta.items():
        setattr(row, field, getattr(row, field) - by)
    row.save()


def test_issue_keeps_the_hash_bound_to_scope_and_purpose(tokens: DatabaseTokens) -> None:
    expires_at = tokens.issue(HASH, "s", "checkout", 60.0)
    row = SubmitToken.objects.get()
    assert (row.token_hash, row.scope, row.purpose) == (HASH, "s", "checkout")
    assert row.expires_at == expires_at
    assert row.expires_at - row.created_at == timedelta(seconds=60)
    assert row.consumed_at is None


def test_consume_once_then_used_and_a_foreign_binding_consumes_nothing(
    tokens: DatabaseTokens,
) -> None:
    tokens.issue(HASH, "s", "checkout", 60.0)
    assert tokens.consume(HASH, "other", "checkout") == INVALID
    assert tokens.consume(HASH, "s", "other") == INVALID
    assert tokens.consume("b" * 64, "s", "checkout") == INVALID
    assert SubmitToken.objects.get().consumed_at is None
    assert tokens.consume(HASH, "s", "checkout") == OK
    assert SubmitToken.objects.get().consumed_at is not None
    assert tokens.consume(HASH, "s", "checkout") == USED
    assert tokens.consume(HASH, "other", "checkout") == INVALID  # others learn nothing


def test_an_expired_token_is_invalid_and_a_tombstone_says_used_for_a_minute(
    tokens: DatabaseTokens,
) -> None:
    tokens.issue(HASH, "s", "p", 60.0)
    move(created_at=timedelta(seconds=61), expires_at=timedelta(seconds=61))
    assert tokens.consume(HASH, "s", "p") == INVALID
    SubmitToken.objects.all().delete()
    tokens.issue(HASH, "s", "p", 60.0)
    assert tokens.consume(HASH, "s", "p") == OK
    move(expires_at=timedelta(seconds=61), consumed_at=timedelta(seconds=TOMBSTONE_SECONDS - 5))
    assert tokens.consume(HASH, "s", "p") == USED  # expired, consumed 55 s ago
    move(consumed_at=timedelta(seconds=6))
    assert tokens.consume(HASH, "s", "p") == INVALID


def test_the_purge_keeps_a_row_a_minute_past_its_expiry_or_consumption(
    tokens: DatabaseTokens,
) -> None:
    now = timezone.now()
    later = now + timedelta(seconds=TOMBSTONE_SECONDS + 60)  # judged a minute before it
    for purpose, ttl in [("live", 600.0), ("expired", 1.0), ("just-expired", 90.0)]:
        tokens.issue(hash_token(purpose), "s", purpose, ttl)
    for purpose in ("tombstone", "old-tombstone"):
        tokens.issue(hash_token(purpose), "s", purpose, 1.0)
        assert tokens.consume(hash_token(purpose), "s", purpose) == OK
    SubmitToken.objects.filter(purpose="tombstone").update(consumed_at=now + timedelta(seconds=90))
    assert tokens.purge(now=later, batch_size=1) == 2
    assert sorted(SubmitToken.objects.values_list("purpose", flat=True)) == [
        "just-expired",
        "live",
        "tombstone",
    ]
    assert tokens.purge(now=later, batch_size=1) == 0


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
def test_of_concurrent_consumers_exactly_one_wins(tokens: DatabaseTokens) -> None:
    """The row is locked while every consumer comes in, so their ``UPDATE``\\ s queue on it."""
    tokens.issue(HASH, "s", "p", 60.0)
    consumers = 12
    overlap = Overlap(consumers)

    def consume(_index: int) -> str:
        return overlap.call(tokens.consume, HASH, "s", "p")

    def lock_the_row_until_all_came(_index: int) -> str:
        with transaction.atomic():
            SubmitToken.objects.select_for_update().get(token_hash=HASH)
            overlap.hold()
        return "held"

    results = succeeded(
        run_threads(
            consumers + 1, lambda i: lock_the_row_until_all_came(i) if i == 0 else consume(i)
        )
    )
    assert Counter(results) == {"held": 1, OK: 1, USED: consumers - 1}
    assert SubmitToken.objects.get().consumed_at is not None
