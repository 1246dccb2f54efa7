"""What a lock backend provides: :class:`Holding` objects for lock names."""

from __future__ import annotations


class Holding:
    """One lock taken (or being tried) by one :class:`~idempotency.Lock`: what its backend needs."""

    def try_acquire(self) -> bool:
        raise NotImplementedError

    def release(self) -> bool:
        raise NotImplementedError

    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        raise NotImplementedError

    def owned(self) -> bool:
        raise NotImplementedError

    def abandon(self) -> None:
        """Give up after failed attempts (free what trying needed)."""


class LockBackend:
    """Makes :class:`Holding` objects for lock names."""

    def holding(self, name: str, timeout: float | None) -> Holding:
        raise NotImplementedError
