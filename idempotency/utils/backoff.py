"""Waiting for someone else: pauses that grow between attempts, until a deadline.

Requests wait for a concurrent first request, functions and tasks for a running owner
of their key, locks for their holder, all the same way::

    backoff = Backoff(wait)
    while not done():
        if not backoff.pause():
            break  # waited ``wait`` seconds

The first pause is ``first`` seconds; each one is 1.5 times the last, up to ``cap``,
and never beyond the deadline. ``jitter`` shortens each pause at random (down to
half) so waiters that started together do not retry in step.
"""

from __future__ import annotations

import asyncio
import random
import time

#: First pause and longest pause (seconds) unless a waiter asks for others.
FIRST_PAUSE = 0.02
LONGEST_PAUSE = 0.25


class Backoff:
    """Growing pauses until ``wait`` seconds have passed from now (``None``: forever)."""

    __slots__ = ("cap", "deadline", "delay", "jitter")

    def __init__(
        self,
        wait: float | None,
        *,
        first: float = FIRST_PAUSE,
        cap: float = LONGEST_PAUSE,
        jitter: bool = False,
    ) -> None:
        self.deadline = None if wait is None else time.monotonic() + max(0.0, wait)
        self.delay = first
        self.cap = cap
        self.jitter = jitter

    def next_pause(self) -> float | None:
        """The next pause, or None once the deadline has passed."""
        now = time.monotonic()
        if self.deadline is not None and now >= self.deadline:
            return None
        pause = self.delay * random.uniform(0.5, 1.0) if self.jitter else self.delay  # not crypto
        if self.deadline is not None:
            pause = min(pause, self.deadline - now)
        self.delay = min(self.delay * 1.5, self.cap)
        return pause

    def pause(self) -> bool:
        """Sleep before the next attempt; False (without sleeping) once time is up."""
        pause = self.next_pause()
        if pause is None:
            return False
        time.sleep(pause)
        return True

    async def apause(self) -> bool:
        """:meth:`pause` on the event loop."""
        pause = self.next_pause()
        if pause is None:
            return False
        await asyncio.sleep(pause)
        return True
