"""The store protocol as a whole, as a Hypothesis rule-based state machine over each
real store (issue 19, item 9): claims, keep-alive renewals, completions, releases, owner
crashes and clock jumps in any order, with the invariants checked after every step:

* at most one live owner per key: a claim never owns a key another owner holds live;
* no completion, release or renewal by a stale fence;
* a completed record never changes: every read returns its body until it expires;
* an expired record is absent.

Time does not really pass: a clock jump ages the records of the machine's keys (their
lease and expiry move into the past by the jump), on the store itself.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from idempotency.stores.base import BaseStore, ClaimStatus, StoredResponse
from idempotency.stores.cache import CacheStore
from idempotency.stores.database import DatabaseStore
from idempotency.stores.redis import RedisStore
from tests.support.clocks import age

LEASE = 50.0
TTL = 200.0
KEYS = ("k0", "k1")
OWNERS = st.integers(min_value=0, max_value=2)
JUMPS = st.sampled_from([10.0, 60.0, 250.0])


@dataclasses.dataclass
class Record:
    """What the model knows of a live record. The expiry is an interval: a takeover
    renews it on the database store and keeps it on the others."""

    state: str
    fence: int
    lease_left: float
    ttl_low: float
    ttl_high: float
    body: bytes = b""


class StoreProtocol(RuleBasedStateMachine):
    store: BaseStore

    def __init__(self) -> None:
        super().__init__()
        self.scope = f"protocol-{uuid.uuid4().hex}"
        self.model: dict[str, Record | None] = dict.fromkeys(KEYS)
        self.fences: dict[tuple[int, str], int] = {}
        self.serial = 0

    # -- rules -------------------------------------------------------------------------

    @rule(owner=OWNERS, key=st.sampled_from(KEYS))
    def claim(self, owner: int, key: str) -> None:
        record = self.model[key]
        got = self.store.claim(self.scope, key, fingerprint="fp", lease=LEASE, ttl=TTL)
        if record is None or (record.state == "in_progress" and record.lease_left <= 0):
            assert got.status is ClaimStatus.CLAIMED, (record, got)
            assert got.taken_over == (record is not None)
            low = TTL if record is None else record.ttl_low
            self.model[key] = Record("in_progress", got.fence, LEASE, low, TTL)
            self.fences[(owner, key)] = got.fence
        elif record.state == "completed":
            assert got.status is ClaimStatus.COMPLETED
            assert got.response is not None and got.response.body == record.body
        else:  # a live owner holds it: never a second one
            assert got.status is ClaimStatus.IN_PROGRESS, (record, got)
            assert got.retry_after > 0

    def _owner_op(self, owner: int, key: str) -> tuple[int, Record | None, bool]:
        fence = self.fences[(owner, key)]
        record = self.model[key]
        current = record is not None and record.state == "in_progress" and record.fence == fence
        return fence, record, current

    @precondition(lambda self: self.fences)
    @rule(data=st.data())
    def extend(self, data: Any) -> None:
        owner, key = data.draw(st.sampled_from(sorted(self.fences)))
        fence, record, current = self._owner_op(owner, key)
        renewed = self.store.extend(self.scope, key, fence=fence, lease=LEASE)
        assert renewed == current, (record, fence)
        if current and record is not None:
            record.lease_left = LEASE
            record.ttl_low, record.ttl_high = (
                max(record.ttl_low, LEASE),
                max(record.ttl_high, LEASE),
            )

    @precondition(lambda self: self.fences)
    @rule(data=st.data())
    def complete(self, data: Any) -> None:
        owner, key = data.draw(st.sampled_from(sorted(self.fences)))
        fence, record, current = self._owner_op(owner, key)
        self.serial += 1
        body = f"owner {owner}, completion {self.serial}".encode()
        done = self.store.complete(
            self.scope, key, fence=fence, response=StoredResponse(200, [], body), ttl=TTL
        )
        if record is None and done:
            # the database keeps an expired claim's row until a new claim replaces it:
            # its own owner, never taken over, may still complete it (nobody else ran)
            assert isinstance(self.store, DatabaseStore)
            current = True
        assert done == current, (record, fence)
        if done:
            self.model[key] = Record("completed", fence, 0, TTL, TTL, body)

    @precondition(lambda self: self.fences)
    @rule(data=st.data())
    def release(self, data: Any) -> None:
        owner, key = data.draw(st.sampled_from(sorted(self.fences)))
        fence, record, current = self._owner_op(owner, key)
        released = self.store.release(self.scope, key, fence=fence)
        if record is None and released:
            assert isinstance(self.store, DatabaseStore)  # as for complete
            current = True
        assert released == current, (record, fence)
        if released:
            self.model[key] = None

    @precondition(lambda self: self.fences)
    @rule(owner=OWNERS)
    def crash(self, owner: int) -> None:
        """The owner dies: it never renews, completes or releases again."""
        for held in [held for held in self.fences if held[0] == owner]:
            del self.fences[held]

    @rule(seconds=JUMPS)
    def clock_jump(self, seconds: float) -> None:
        for key, record in self.model.items():
            if record is None:
                continue
            age(self.store, self.scope, key, seconds)
            record.lease_left -= seconds
            record.ttl_low -= seconds
            record.ttl_high -= seconds
            if record.ttl_high <= 0:
                self.model[key] = None
            elif record.ttl_low <= 0:
                # the store renewed the expiry on takeover, or did not: ask it
                if self.store.lookup(self.scope, key, fingerprint="fp") is None:
                    self.model[key] = None
                else:
                    record.ttl_low = record.ttl_high

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def reads_agree_with_the_model(self) -> None:
        for key, record in self.model.items():
            seen = self.store.lookup(self.scope, key, fingerprint="fp")
            if record is None:
                assert seen is None, (key, seen)  # an expired record is absent
            elif record.state == "completed":
                assert seen is not None and seen.status is ClaimStatus.COMPLETED
                assert seen.response is not None and seen.response.body == record.body
            else:
                assert seen is not None and seen.status is ClaimStatus.IN_PROGRESS, seen
                assert (seen.retry_after > 0) == (record.lease_left > 0), (record, seen)


@pytest.fixture(
    params=[
        pytest.param("database", id="database"),
        pytest.param("redis", id="redis", marks=pytest.mark.redis),
        pytest.param("cache", id="cache"),
    ]
)
def protocol_store(request: pytest.FixtureRequest, db: Any) -> BaseStore:
    return {"database": DatabaseStore, "redis": RedisStore, "cache": CacheStore}[request.param]()


def test_the_store_protocol_holds_under_any_sequence(protocol_store: BaseStore) -> None:
    machine = type("Protocol", (StoreProtocol,), {"store": protocol_store})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=40,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
