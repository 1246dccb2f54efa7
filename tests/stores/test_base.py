"""The values and helpers every store shares (``idempotency/stores/base.py``)."""

from __future__ import annotations

import os
import random

import pytest

from idempotency.stores.base import ClaimStatus, KeyState, StoredResponse, new_fence


def test_fences_fit_a_signed_bigint_and_do_not_repeat() -> None:
    fences = [new_fence() for _ in range(50_000)]
    assert all(0 < fence < 2**63 for fence in fences)
    assert len(set(fences)) == len(fences)


def test_seeding_the_random_module_does_not_repeat_fences() -> None:
    """An application (or a test suite) seeding ``random`` in two processes must not give
    both the same tokens: the fences have a generator of their own."""
    random.seed(0)
    first = [new_fence() for _ in range(5)]
    random.seed(0)
    again = [new_fence() for _ in range(5)]
    assert first != again


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_draws_other_fences_than_its_parent() -> None:
    """Workers forked from one parent (gunicorn's preload, Celery's prefork) share its
    generator's state at the fork: the child reseeds, so their next tokens differ."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next fences, to the parent
        try:
            os.write(write, ",".join(str(new_fence()) for _ in range(3)).encode())
        finally:
            os._exit(0)
    os.close(write)
    parent = [new_fence() for _ in range(3)]
    with os.fdopen(read) as pipe:
        child = [int(part) for part in pipe.read().split(",")]
    os.waitpid(pid, 0)
    assert len(child) == 3
    assert not set(child) & set(parent)


def test_claims_and_responses_are_immutable_values() -> None:
    response = StoredResponse(201, [("Content-Type", "application/json")], b"{}")
    claim = KeyState(ClaimStatus.COMPLETED, response=response, expires_at=1.0)
    with pytest.raises(AttributeError):
        claim.fence = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        response.status = 200  # type: ignore[misc]
    assert claim == KeyState(ClaimStatus.COMPLETED, response=response, expires_at=1.0)
    assert claim._replace(fence=5).fence == 5
    assert not claim.owned
    assert KeyState(ClaimStatus.CLAIMED, fence=7).owned
    assert StoredResponse(204).headers == ()
    assert StoredResponse(204).body == b""


def test_stored_response_from_parts_reads_what_the_stores_keep() -> None:
    """Headers as the stored JSON text or as pairs, the body as bytes, a memoryview (the
    database's ``bytea``) or None."""
    stored = StoredResponse.from_parts(
        "201", '[["Content-Type", "application/json"]]', memoryview(b"{}")
    )
    assert stored == StoredResponse(201, [("Content-Type", "application/json")], b"{}")
    assert StoredResponse.from_parts(204, None, None) == StoredResponse(204, [], b"")
    assert StoredResponse.from_parts(200, [["A", 1]], b"x").headers == [("A", "1")]
