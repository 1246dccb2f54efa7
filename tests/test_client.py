"""The client's retry policy and decisions (idempotency.client), without a server:
``Retry-After`` parsing, the backoff, each attempt's timeout, and which answers are worth
another attempt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from idempotency.client import (
    RetryPolicy,
    answer_means_not_run,
    is_retryable_response,
    new_key,
    problem_code,
    retry_after_seconds,
)


def test_retry_after_parsing() -> None:
    def seconds(value: str) -> float | None:
        return retry_after_seconds(httpx.Response(409, headers={"Retry-After": value}))

    assert seconds("3") == 3.0
    assert seconds("0.5") == 0.5
    assert seconds("-4") == 0.0
    assert seconds("soon") is None
    assert seconds("nan") is None
    later = datetime.now(UTC) + timedelta(seconds=30)
    parsed = seconds(format_datetime(later, usegmt=True))
    assert parsed is not None and 25 <= parsed <= 30
    assert retry_after_seconds(httpx.Response(409)) is None


def test_backoff_grows_is_capped_and_jittered() -> None:
    steady = RetryPolicy(backoff=0.5, max_backoff=4, jitter=False)
    assert [steady.pause(n, None) for n in range(1, 7)] == [0.5, 1, 2, 4, 4, 4]
    assert steady.pause(3, 2.5) == 2.5  # the server's Retry-After wins
    jittered = RetryPolicy(backoff=0.5, max_backoff=4)
    pauses = [jittered.pause(4, None) for _ in range(200)]
    assert all(0 <= p <= 4 for p in pauses) and len(set(pauses)) > 100
    assert all(2.0 <= jittered.pause(1, 2.0) <= 2.2 for _ in range(50))
    with pytest.raises(ValueError):
        RetryPolicy(deadline=0)


def test_each_attempt_gets_at_most_the_time_left() -> None:
    policy = RetryPolicy(timeout=httpx.Timeout(10.0, connect=5.0))
    cut = policy.attempt_timeout(2.5)
    assert (cut.connect, cut.read, cut.write, cut.pool) == (2.5, 2.5, 2.5, 2.5)
    full = policy.attempt_timeout(100)
    assert (full.connect, full.read) == (5.0, 10.0)


def _problem(status: int, code: str | None = None, **headers: str) -> httpx.Response:
    body = {"type": f"https://example.com/problems/{code}"} if code else {"title": "x"}
    return httpx.Response(
        status, json=body, headers={"Content-Type": "application/problem+json", **headers}
    )


def test_which_answers_are_worth_another_attempt() -> None:
    assert is_retryable_response(httpx.Response(500))
    assert is_retryable_response(_problem(503, "idempotency-store-unavailable"))
    assert is_retryable_response(_problem(409, "idempotency-request-in-progress"))
    assert is_retryable_response(httpx.Response(409, headers={"Retry-After": "1"}))
    assert not is_retryable_response(_problem(409, "submit-token-used"))
    assert not is_retryable_response(_problem(422, "idempotency-key-mismatch"))
    assert not is_retryable_response(httpx.Response(201))


def test_a_problem_is_named_by_its_code_or_the_end_of_its_type() -> None:
    assert problem_code(_problem(409, "idempotency-request-in-progress")) == (
        "idempotency-request-in-progress"
    )
    coded = httpx.Response(409, json={"code": "c", "type": "https://x/other"})
    assert problem_code(coded) == "c"
    assert problem_code(httpx.Response(409, text="not json")) is None
    assert problem_code(httpx.Response(409, json=["a", "list"])) is None
    assert answer_means_not_run(_problem(503, "idempotency-store-unavailable"))
    assert not answer_means_not_run(httpx.Response(503))


def test_every_operation_gets_a_fresh_key() -> None:
    keys = {new_key() for _ in range(100)}
    assert len(keys) == 100 and all(len(k) == 36 for k in keys)
