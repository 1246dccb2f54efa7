"""RedisStore (``idempotency.stores.redis``): its scripts' replies read into states, the
token every reply echoes, and a resend that recognises itself; the contract every store
keeps is in test_contract.py, and replicas, failovers and a cluster in tests/scale/."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from idempotency.stores.records import ClaimStatus, StoredResponse, record_digest
from idempotency.stores.redis import (
    RedisStore,
    claim_args,
    complete_args,
    key_state_from_lookup,
    key_state_from_reply,
)

RESPONSE = StoredResponse(201, [("Content-Type", "application/json")], b'{"ok": true}')


def test_a_claims_reply_becomes_its_state() -> None:
    claimed = key_state_from_reply(
        [b"claimed", b"step-1", b'{"n": 1}', b"1", b"7"], 7, "s", "k", "fp"
    )
    assert claimed.owned and claimed.fence == 7 and claimed.taken_over
    assert (claimed.recovery_point, claimed.recovery_data) == ("step-1", {"n": 1})
    busy = key_state_from_reply([b"in_progress", b"1500", b"", b"", b"7"], 7, "s", "k", "fp")
    assert busy.status is ClaimStatus.IN_PROGRESS and busy.retry_after == 1.5
    other = key_state_from_reply([b"mismatch", b"fp-2", b"7"], 7, "s", "k", "fp")
    assert other.status is ClaimStatus.MISMATCH and other.fingerprint == "fp-2"


@pytest.mark.parametrize("reply", [[b"claimed", b"", b"", b"", b"8"], [], b"OK", None])
def test_a_reply_meant_for_another_command_is_refused_as_an_outage(reply: Any) -> None:
    with pytest.raises(RedisConnectionError, match="meant for another command"):
        key_state_from_reply(reply, 7, "s", "k", "fp")


def test_a_lookup_reads_a_tombstone_as_absent() -> None:
    tombstone = [b"r", None, None, None, None, None, None, None, None, None, -1, b"3"]
    assert key_state_from_lookup(tombstone, 3, "s", "k", "fp") is None
    absent = [None] * 10 + [-2, b"3"]
    assert key_state_from_lookup(absent, 3, "s", "k", "fp") is None


def test_a_completed_records_reply_is_authenticated_before_it_answers() -> None:
    fence, status, headers, body, ttl, tag = complete_args("s", "k", "fp", 7, RESPONSE, 60)
    reply = [b"completed", status, headers, body, 60_000, b"fp", str(fence).encode(), tag, b"9"]
    found = key_state_from_reply(reply, 9, "s", "k", "fp")
    assert found.status is ClaimStatus.COMPLETED and found.response == RESPONSE
    mismatch = key_state_from_reply(reply, 9, "s", "k", "fp-2")
    assert mismatch.status is ClaimStatus.MISMATCH and mismatch.fingerprint == "fp"


def test_a_claims_arguments_are_milliseconds() -> None:
    assert claim_args("fp", 7, 1.5, 0.0001, "POST", "/r") == ["fp", 7, 1500, 1, "POST", "/r"]


def test_a_record_and_its_counters_share_one_cluster_slot_by_their_hash_tag() -> None:
    store = RedisStore("redis://127.0.0.1:1/0", key_prefix="p")
    assert store.record_key("s", "k") == f"p:{{{record_digest('s', 'k')}}}:rec"
    counter, left = store._quota_counter("s", 60)
    assert counter.startswith(f"p:{{{record_digest('s', '')}}}:quota:") and 0 < left <= 60


@pytest.mark.redis
def test_a_resent_claim_and_a_resent_release_recognise_themselves() -> None:
    """A claim or a release whose reply was lost and that is sent again with the same
    token answers as the first send did, never "in progress" or "not the owner"."""
    store = RedisStore()
    record = store.record_key("user:1", str(uuid.uuid4()))
    args = claim_args("fp", 11, 30, 60, "POST", "/r")
    first = key_state_from_reply(store._eval("claim", record, args), 11, "user:1", "k", "fp")
    again = key_state_from_reply(store._eval("claim", record, args), 11, "user:1", "k", "fp")
    assert first.owned and again.owned and not again.taken_over
    other = key_state_from_reply(
        store._eval("claim", record, claim_args("fp", 12, 30, 60, "", "")), 12, "user:1", "k", "fp"
    )
    assert other.status is ClaimStatus.IN_PROGRESS
    release = [11, 60_000]
    assert store._eval("release", record, release)[0] == 1
    assert store._eval("release", record, release)[0] == 1  # the tombstone keeps its fence
    assert store._eval("release", record, [12, 60_000])[0] == 0
