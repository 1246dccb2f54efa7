"""What stores answer and keep (``idempotency.stores.records``): a stored response read back
from its stored parts, the fencing tokens (unique, never 0, fit a signed BIGINT, and not
the application's ``random``), the names of records in caches and Redis, and the record
quota's fixed windows."""

from __future__ import annotations

import random

import pytest

from idempotency.stores.records import (
    ClaimStatus,
    KeyState,
    StoredResponse,
    new_fence,
    quota_window,
    record_digest,
)


def test_a_stored_response_comes_back_from_its_stored_parts() -> None:
    original = StoredResponse(201, [("Content-Type", "application/json")], b'{"id": 1}')
    again = StoredResponse.from_parts("201", original.headers_json(), memoryview(original.body))
    assert again == original
    assert StoredResponse.from_parts(204, None, None) == StoredResponse(204, [], b"")


def test_only_a_claimed_state_is_owned() -> None:
    assert KeyState(ClaimStatus.CLAIMED, fence=5).owned
    for status in (ClaimStatus.COMPLETED, ClaimStatus.IN_PROGRESS, ClaimStatus.MISMATCH):
        assert not KeyState(status).owned


def test_fences_are_distinct_positive_63_bit_numbers_whatever_the_app_seeds() -> None:
    random.seed(0)
    first = [new_fence() for _ in range(1000)]
    random.seed(0)
    second = [new_fence() for _ in range(1000)]
    fences = first + second
    assert len(set(fences)) == len(fences)  # random.seed(0) does not replay them
    assert all(0 < fence < 2**63 for fence in fences)


def test_a_record_name_is_fixed_length_and_differs_by_scope_and_key() -> None:
    names = {
        record_digest("auth.user:1", "k"),
        record_digest("auth.user:2", "k"),
        record_digest("auth.user:1", "k2"),
    }
    assert len(names) == 3
    assert {len(name) for name in names} == {40}
    assert record_digest("auth.user:1", "k") == record_digest("auth.user:1", "k")


def test_a_quota_window_starts_on_a_whole_multiple_and_says_what_is_left() -> None:
    assert quota_window(60, 1_000_050.5) == (1_000_020, pytest.approx(29.5))
    assert quota_window(60, 1_000_020.0) == (1_000_020, pytest.approx(60.0))
    start, left = quota_window(60, 1_000_079.9999999)
    assert start == 1_000_020 and left == 0.001  # never 0: a counter's TTL must be positive
    assert quota_window(3600, 7200.0)[0] == 7200
