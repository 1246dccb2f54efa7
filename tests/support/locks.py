"""Holdings of a database lock backend taken directly (``backend.holding(...)``), for the
tests of one backend's own ways, and what is left of a lock whose session the server ended."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from idempotency.locks import Holding, LockBackend


class Holdings:
    """Makes holdings of ``backend`` (``holdings(name, timeout)``) and remembers them, so
    that :meth:`abandon_all` closes their connections at the end of the test."""

    def __init__(self, backend: LockBackend) -> None:
        self.backend = backend
        self.made: list[Holding] = []

    def __call__(self, name: str, timeout: float | None) -> Any:
        holding = self.backend.holding(name, timeout)
        self.made.append(holding)
        return holding

    def abandon_all(self) -> None:
        for holding in self.made:
            holding.abandon()


def went_with_its_session(held: Holding, take_again: Callable[[], Holding]) -> None:
    """``held``'s session was ended by the server: the lock is neither owned, extended nor
    released by it, and a new holding of its name (``take_again()``) gets it at once."""
    assert held.owned() is False
    assert held.extend(5.0) is False
    assert held.release() is False
    other = take_again()
    assert other.try_acquire()
    assert other.release()
