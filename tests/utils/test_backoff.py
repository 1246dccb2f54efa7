"""Backoff (``idempotency.utils.backoff``): pauses that grow by half each time up to their
cap, never past the deadline, shortened at random with ``jitter``; on a clock the test
moves (the module's ``time``), so nothing sleeps."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace
from typing import Any

import pytest

from idempotency.utils import backoff as backoff_module
from idempotency.utils.backoff import Backoff


class Clock:
    """``time.monotonic`` and ``time.sleep`` of a clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    sleep = advance  # what the module calls: the clock moves, nobody waits


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(backoff_module, "time", fake)

    async def asleep(seconds: float) -> None:
        fake.advance(seconds)

    monkeypatch.setattr(backoff_module, "asyncio", SimpleNamespace(sleep=asleep))
    return fake


def test_pauses_grow_by_half_up_to_the_cap(clock: Clock) -> None:
    backoff = Backoff(None, first=0.1, cap=0.3)
    pauses = [backoff.next_pause() for _ in range(5)]
    assert pauses == pytest.approx([0.1, 0.15, 0.225, 0.3, 0.3])


def test_the_last_pause_ends_at_the_deadline_and_then_time_is_up(clock: Clock) -> None:
    backoff = Backoff(1.0, first=0.4, cap=10)
    while backoff.pause():
        pass
    assert clock.slept == pytest.approx([0.4, 0.6])  # 0.9 would have run past 1.0 s
    assert clock.now == pytest.approx(1001.0)
    assert backoff.next_pause() is None
    assert not backoff.pause()
    assert len(clock.slept) == 2  # a pause after the deadline does not sleep


def test_no_wait_means_no_pause_at_all(clock: Clock) -> None:
    assert not Backoff(0).pause()
    assert not Backoff(-5).pause()  # a negative wait is no wait
    assert clock.slept == []


def test_jitter_shortens_each_pause_to_between_half_and_all_of_it(clock: Clock) -> None:
    random.seed(7)
    plain = Backoff(None, first=0.2, cap=0.2)
    shaken = Backoff(None, first=0.2, cap=0.2, jitter=True)
    pauses = [shaken.next_pause() for _ in range(200)]
    assert all(0.1 <= pause <= 0.2 for pause in pauses if pause is not None)
    assert len({round(p or 0, 6) for p in pauses}) > 50  # they do differ
    assert plain.next_pause() == 0.2


def test_the_async_pause_waits_on_the_loop_the_same_way(clock: Clock) -> None:
    async def wait_out(backoff: Backoff) -> list[bool]:
        return [await backoff.apause() for _ in range(4)]

    answers: Any = asyncio.run(wait_out(Backoff(0.5, first=0.2, cap=1)))
    assert answers == [True, True, False, False]
    assert clock.slept == pytest.approx([0.2, 0.3])
