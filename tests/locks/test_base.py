"""``idempotency/locks/base.py``: :class:`Lock` and :func:`lock` over any backend, and the
backends by alias. Here on a backend of this module's own (every built-in backend under
the same contract, across processes: tests/locks/test_locks.py)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from idempotency import signals
from idempotency.exceptions import LockNotAcquired, StoreUnavailable
from idempotency.locks import Holding, Lock, LockBackend, get_backend, lock
from tests.support.counting import received, unique
from tests.support.stores import entry, locks_using


class Memory(LockBackend):
    """Locks in this process: a name is held by at most one holding. ``busy`` names are
    refused ``busy[name]`` times first; ``broken`` makes every release raise."""

    def __init__(self) -> None:
        self.holders: dict[str, MemoryHolding] = {}
        self.busy: dict[str, int] = {}
        self.abandoned: list[str] = []
        self.broken = False
        self.guard = threading.Lock()

    def holding(self, name: str, timeout: float | None) -> Holding:
        return MemoryHolding(self, name)


class MemoryHolding(Holding):
    def __init__(self, backend: Memory, name: str) -> None:
        self.backend, self.name = backend, name
        self.extended: list[tuple[float, bool]] = []

    def try_acquire(self) -> bool:
        with self.backend.guard:
            if self.backend.busy.get(self.name, 0) > 0:
                self.backend.busy[self.name] -= 1
                return False
            return self.backend.holders.setdefault(self.name, self) is self

    def release(self) -> bool:
        if self.backend.broken:
            raise StoreUnavailable()
        with self.backend.guard:
            if self.backend.holders.get(self.name) is not self:
                return False
            del self.backend.holders[self.name]
            return True

    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        self.extended.append((additional, replace_ttl))
        return self.owned()

    def owned(self) -> bool:
        return self.backend.holders.get(self.name) is self

    def abandon(self) -> None:
        self.backend.abandoned.append(self.name)


@pytest.fixture
def memory() -> Memory:
    return Memory()


def test_one_holder_at_a_time_and_free_again_after_release(memory: Memory) -> None:
    name = unique("one")
    first, second = Lock(name, backend=memory), Lock(name, backend=memory)
    assert repr(first) == f"<Lock {name!r} free>"
    assert first.acquire() and first.held and first.owned()
    assert repr(first) == f"<Lock {name!r} held>"
    assert second.acquire() is False and not second.held
    assert memory.abandoned == [name]  # the failed attempt gave back what it took
    with pytest.raises(RuntimeError, match="not reentrant"):
        first.acquire()
    assert first.release() is True and not first.held
    assert first.release() is False  # nothing held any more
    assert second.acquire() and second.release()


def test_a_wait_tries_again_until_the_lock_is_free(memory: Memory) -> None:
    name = unique("waits")
    memory.busy[name] = 3
    held = Lock(name, wait=30, backend=memory)
    assert held.acquire()
    assert memory.busy[name] == 0 and memory.abandoned == []
    held.release()
    memory.busy[name] = 1
    assert Lock(name, backend=memory).acquire() is False  # wait=0: one attempt only


def test_entering_a_held_lock_raises_and_says_so(memory: Memory) -> None:
    name = unique("entered")
    with lock(name, backend=memory) as held:
        assert held.owned()
        with (
            received(signals.lock_not_acquired) as refused,
            pytest.raises(LockNotAcquired) as caught,
            lock(name, backend=memory),
        ):
            pass
        assert (caught.value.name, caught.value.waited) == (name, 0.0)
        assert [event["name"] for event in refused] == [name]
    assert not held.held and memory.holders == {}


def test_a_lost_or_unreachable_lock_releases_false_with_a_warning(
    memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="idempotency.locks")
    name = unique("lost")
    held = Lock(name, timeout=5, backend=memory)
    assert held.acquire()
    memory.holders[name] = MemoryHolding(memory, name)  # expired, and taken by another owner
    assert held.release() is False
    assert "no longer held at release" in caplog.text
    assert name in memory.holders  # the new owner's lock is untouched
    memory.holders.clear()
    caplog.clear()
    assert held.acquire()
    memory.broken = True
    assert held.release() is False and not held.held
    assert "its backend is unreachable" in caplog.text


def test_extend_adds_to_the_timeout_or_replaces_it(memory: Memory) -> None:
    held = Lock(unique("long"), timeout=10, backend=memory)
    assert held.extend(5) is False  # not held
    assert held.acquire()
    with pytest.raises(ValueError, match="positive"):
        held.extend(0)
    assert held.extend(5) and held.timeout == 15
    assert held.extend(2, replace_ttl=True) and held.timeout == 2
    holding: Any = memory.holders[held.name]
    assert holding.extended == [(5, False), (2, True)]
    memory.holders.clear()
    assert held.extend(5) is False and held.timeout == 2


def test_as_a_decorator_every_call_takes_a_new_lock(memory: Memory) -> None:
    name = unique("job")
    seen: list[bool] = []

    @lock(name, backend=memory)
    def job() -> str:
        seen.append(Lock(name, backend=memory).acquire())
        return "done"

    @lock(name, backend=memory)
    async def async_job() -> str:
        seen.append(name in memory.holders)
        return "done"

    assert job() == "done" and job() == "done"
    assert async_to_sync(async_job)() == "done"
    assert seen == [False, False, True] and memory.holders == {}
    assert job.__name__ == "job"
    with pytest.raises(TypeError, match="decorates callables"):
        lock(name)("not a function")  # type: ignore[arg-type]  # on purpose


def test_an_exception_while_trying_abandons_the_attempt(memory: Memory) -> None:
    class Failing(MemoryHolding):
        def try_acquire(self) -> bool:
            raise StoreUnavailable()

    class FailingMemory(Memory):
        def holding(self, name: str, timeout: float | None) -> Holding:
            return Failing(self, name)

    backend = FailingMemory()
    with pytest.raises(StoreUnavailable):
        Lock("x", backend=backend).acquire()
    assert backend.abandoned == ["x"]


@pytest.mark.parametrize(("name", "timeout"), [("", 30.0), (None, 30.0), ("x", 0), ("x", -1.0)])
def test_a_lock_needs_a_name_and_a_positive_timeout(name: Any, timeout: float) -> None:
    with pytest.raises(ValueError):
        lock(name, timeout=timeout)


def test_backends_by_alias_or_as_given(memory: Memory) -> None:
    assert get_backend(memory) is memory
    path = "idempotency.locks.RedisLockBackend"
    with override_settings(IDEMPOTENCY={"LOCKS": {"default": entry(path), "b": entry(path)}}):
        default = get_backend()
        assert type(default).__name__ == "RedisLockBackend"
        assert get_backend("default") is default  # one per process
        assert get_backend("b") is not default
        with pytest.raises(ImproperlyConfigured):
            get_backend("missing")
    with (
        override_settings(IDEMPOTENCY=locks_using("no.such.Backend")),
        pytest.raises(ImproperlyConfigured),
    ):
        get_backend()
