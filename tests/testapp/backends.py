"""Token and lock backends of a third party: classes the library knows only by the dotted
path a setting names (tests/utils/test_backends.py)."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any, ClassVar

from django.utils import timezone

from idempotency.locks.base import Holding, LockBackend
from idempotency.stores.cache import CacheStore
from idempotency.tokens.base import INVALID, OK, USED, TokenBackend


class MemoryTokens(TokenBackend):
    """Tokens in a dict of this process: ``token hash -> [scope, purpose, expiry, used]``."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.tokens: dict[str, list[object]] = {}

    def issue(self, token_hash: str, scope: str, purpose: str, ttl: float) -> datetime:
        expires_at = timezone.now() + timedelta(seconds=ttl)
        with self.guard:
            self.tokens[token_hash] = [scope, purpose, expires_at, False]
        return expires_at

    def consume(self, token_hash: str, scope: str, purpose: str) -> str:
        with self.guard:
            entry = self.tokens.get(token_hash)
            if entry is None or entry[:2] != [scope, purpose]:
                return INVALID
            if entry[3]:
                return USED
            entry[3] = True
            return OK


class HalfTokens(TokenBackend):
    """Issues tokens but never implements consume(): abstract (check E046)."""

    def issue(self, token_hash: str, scope: str, purpose: str, ttl: float) -> datetime:
        return timezone.now()


class ThreadHolding(Holding):
    def __init__(self, backend: ThreadLocks, name: str, timeout: float | None) -> None:
        self.backend = backend
        self.name = name
        self.timeout = timeout
        self.token = object()

    def try_acquire(self) -> bool:
        with self.backend.guard:
            owner = self.backend.owners.get(self.name)
            if owner is not None and (owner[1] is None or owner[1] > time.monotonic()):
                return False
            expiry = None if self.timeout is None else time.monotonic() + self.timeout
            self.backend.owners[self.name] = (self.token, expiry)
            self.backend.taken.append(self.name)
            return True

    def release(self) -> bool:
        with self.backend.guard:
            if not self._owns():
                return False
            del self.backend.owners[self.name]
            return True

    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        with self.backend.guard:
            if not self._owns():
                return False
            _token, expiry = self.backend.owners[self.name]
            start = time.monotonic() if replace_ttl or expiry is None else expiry
            self.backend.owners[self.name] = (self.token, start + additional)
            return True

    def owned(self) -> bool:
        with self.backend.guard:
            return self._owns()

    def _owns(self) -> bool:
        owner = self.backend.owners.get(self.name)
        return owner is not None and owner[0] is self.token


class ThreadLocks(LockBackend):
    """Locks between the threads of this process; ``taken`` lists every lock taken."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.owners: dict[str, tuple[object, float | None]] = {}
        self.taken: list[str] = []

    def holding(self, name: str, timeout: float | None) -> Holding:
        return ThreadHolding(self, name, timeout)


class CountingStore(CacheStore):
    """A cache store that counts how often it is made; a second one being made at the same
    time is let through at once, so two made concurrently are seen (tests of the store
    handler's one instance per alias)."""

    made: ClassVar[list[CountingStore]] = []
    second = threading.Event()

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        made = CountingStore.made
        made.append(self)
        if len(made) > 1:
            CountingStore.second.set()
        # a bounded wait for a concurrent second construction: with the handler's lock
        # none comes, and this waits out its bound
        CountingStore.second.wait(0.5)
