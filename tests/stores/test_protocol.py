"""The store protocol as a whole, as a Hypothesis rule-based state machine over each
real store (issue 19, item 9; issue 37, item 4): the lease-mode actions of the SPIN model
(``model/protocol.pml``, docs/explanation/model.md), run on ``DatabaseStore`` (PostgreSQL,
or SQLite without one), ``RedisStore`` and ``CacheStore`` in any order, with the model's
invariants checked after every step.

The rules are the model's actions, each one store method (the same mapping as the
model's): ``peek`` (``lookup``), ``claim`` (a takeover once the lease ran out),
``effect`` (the owner's body: external, counted), ``renew`` and ``watchdog``
(``extend``: one owner's renewal, or every live owner's, in time), ``complete``,
``release``, ``crash`` (the owner dies: it never calls again, its keep-alive with it) and
``tick`` (the store's clock moves: leases and expiry age, on the store itself).

The invariants, named as the model names them:

* P1: the effect runs at most once per record, unless lease mode's assumptions were broken
  for it: a tick ran out the lease of an owner still running (A1), or an owner that ran
  its effect died or released before completing (A2);
* P2: no two completions are accepted for one record;
* P3: a stale owner's completion, release and renewal are refused, a current owner's
  accepted (checked on every answer); RedisStore answers a completion or a release sent
  again by the owner whose first one it accepted as it answered the first (a resend after
  a lost reply), changing nothing;
* P4 and P5: every read of a completed record returns the response of its one accepted
  completion, and a claim of it replays that response;
* reads agree with the model: one live owner at a time (a claim never owns a key whose
  lease is live), an expired record is absent, a lease reads as live exactly while it is.

Atomic mode (:class:`AtomicProtocol`, ``DatabaseStore`` only) runs the model's atomic
actions: ``begin`` (the transaction opens and claims the key, or replays it), ``effect``
(a row written in that transaction), ``complete``, ``commit`` and ``crash`` (the owner
dies anywhere before the commit: everything rolls back), beside ``peek``, ``tick`` and a
stale owner's late ``complete`` and ``extend``. After every step: a claim is never seen
outside its transaction, every committed effect has its committed completion and the
reverse (claim, effect and completion commit together, a crash leaves nothing), at most
one effect per record's life with no assumption at all, and a replay returns the one
committed response. One connection holds one transaction at a time: concurrent
duplicates waiting on an uncommitted claim are the storms' (``tests/storms``), on
PostgreSQL and MariaDB.

The database store runs on the run's database: SQLite in the quick tier, PostgreSQL in
its tier, MariaDB in the MariaDB tier (``.ci/mariadb-tier`` names this file).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, Phase, settings
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
from tests.testapp.models import Effect

LEASE = 50.0
TTL = 200.0
KEYS = ("k0", "k1")
OWNERS = st.integers(min_value=0, max_value=2)
#: A keep-alive's period (a third of the lease), a whole lease, past the TTL.
TICKS = st.sampled_from([LEASE / 3, 60.0, 250.0])

Attempt = tuple[int, str]  # (owner, key)


@dataclasses.dataclass
class Life:
    """One record's life, from a claim of an absent key until it is absent again (a
    takeover keeps it): the model's ghosts, judged by P1 and P2."""

    effects: int = 0
    completions: int = 0
    #: A1 broken: a tick ran out the lease of an owner still running.
    lease_ran_out_under_a_live_owner: bool = False
    #: A2 broken: an owner that ran its effect died or released before completing.
    effect_without_completion: bool = False


@dataclasses.dataclass
class Record:
    """What the model knows of a live record. The expiry is an interval: a takeover
    renews it on the database store and keeps it on the others."""

    state: str
    fence: int
    owner: int  # whose claim is current: a takeover makes the last owner stale
    lease_left: float
    ttl_low: float
    ttl_high: float
    life: Life
    body: bytes = b""


class StoreProtocol(RuleBasedStateMachine):
    store: BaseStore

    def __init__(self) -> None:
        super().__init__()
        self.scope = f"protocol-{uuid.uuid4().hex}"
        self.model: dict[str, Record | None] = dict.fromkeys(KEYS)
        #: each owner's last token per key (kept after its attempt ended: a stale caller)
        self.fences: dict[Attempt, int] = {}
        #: attempts running: claimed, neither completed, released nor crashed
        self.running: set[Attempt] = set()
        self.ran_effect: set[Attempt] = set()
        self.lives: dict[Attempt, Life] = {}
        self.all_lives: list[Life] = []
        self.serial = 0
        #: each key's last accepted release (owner, token), while the record it left
        #: lives (RedisStore's tombstone, or the record of a claim made over it)
        self.last_release: dict[str, tuple[int, int]] = {}

    # -- helpers ---------------------------------------------------------------------------

    def _current(self, owner: int, key: str) -> tuple[int, Record | None, bool]:
        """The owner's token, the model's record, and whether the owner's claim is current
        (the ghost: a takeover, completion or release since makes it stale)."""
        fence = self.fences[(owner, key)]
        record = self.model[key]
        current = (
            record is not None
            and record.state == "in_progress"
            and record.owner == owner
            and record.fence == fence
        )
        return fence, record, current

    def _end(self, attempt: Attempt, *, completed: bool) -> None:
        """An attempt ends; one that ran its effect and did not complete breaks A2."""
        if attempt in self.running and attempt in self.ran_effect and not completed:
            self.lives[attempt].effect_without_completion = True
        self.running.discard(attempt)
        self.ran_effect.discard(attempt)

    # -- the model's actions ------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS))
    def peek(self, key: str) -> None:
        """The lookup before a claim: replay, 409, or go on to claim."""
        self._check_read(key)

    @rule(owner=OWNERS, key=st.sampled_from(KEYS))
    def claim(self, owner: int, key: str) -> None:
        record = self.model[key]
        got = self.store.claim(self.scope, key, fingerprint="fp", lease=LEASE, ttl=TTL)
        if record is None or (record.state == "in_progress" and record.lease_left <= 0):
            assert got.status is ClaimStatus.CLAIMED, (record, got)
            assert got.taken_over == (record is not None)
            if record is None:
                life, low = Life(), TTL
                self.all_lives.append(life)
            else:
                life, low = record.life, record.ttl_low
            attempt = (owner, key)
            self._end(attempt, completed=False)  # a new attempt of the same owner
            self.model[key] = Record("in_progress", got.fence, owner, LEASE, low, TTL, life)
            self.fences[attempt] = got.fence
            self.running.add(attempt)
            self.lives[attempt] = life
        elif record.state == "completed":  # P4: the replay returns the completed response
            assert got.status is ClaimStatus.COMPLETED
            assert got.response is not None and got.response.body == record.body
        else:  # a live owner holds it: never a second one
            assert got.status is ClaimStatus.IN_PROGRESS, (record, got)
            assert got.retry_after > 0

    @precondition(lambda self: self.running - self.ran_effect)
    @rule(data=st.data())
    def effect(self, data: Any) -> None:
        """The owner's body runs its effect (external: nothing in the store changes)."""
        attempt = data.draw(st.sampled_from(sorted(self.running - self.ran_effect)))
        self.ran_effect.add(attempt)
        self.lives[attempt].effects += 1

    @precondition(lambda self: self.fences)
    @rule(data=st.data())
    def renew(self, data: Any) -> None:
        """One renewal by any owner, its claim current or stale (P3)."""
        owner, key = data.draw(st.sampled_from(sorted(self.fences)))
        self._renew(owner, key)

    @precondition(lambda self: self.running)
    @rule()
    def watchdog(self) -> None:
        """The keep-alive of every running owner renews, in time."""
        for owner, key in sorted(self.running):
            self._renew(owner, key)

    def _renew(self, owner: int, key: str) -> None:
        fence, record, current = self._current(owner, key)
        renewed = self.store.extend(self.scope, key, fence=fence, lease=LEASE)
        assert renewed == current, (record, fence)  # P3
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
        fence, record, current = self._current(owner, key)
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
        resent = (
            record is not None
            and record.state == "completed"
            and (record.owner, record.fence) == (owner, fence)
        )
        if resent and isinstance(self.store, RedisStore):
            # the owner's completion sent again (its reply lost): RedisStore recognises
            # its own token and answers as the first send did, storing nothing new
            assert done, (record, fence)
            self._end((owner, key), completed=True)
            return
        assert done == current, (record, fence)  # P3
        if done:
            life = self.lives[(owner, key)]
            assert life.completions == 0  # P2
            life.completions += 1
            self.model[key] = Record("completed", fence, owner, 0, TTL, TTL, life, body)
        self._end((owner, key), completed=done)

    @precondition(lambda self: self.fences)
    @rule(data=st.data())
    def release(self, data: Any) -> None:
        """A view's error frees the key (P3: only its current owner's release)."""
        owner, key = data.draw(st.sampled_from(sorted(self.fences)))
        fence, record, current = self._current(owner, key)
        released = self.store.release(self.scope, key, fence=fence)
        if isinstance(self.store, RedisStore) and self.last_release.get(key) == (owner, fence):
            # the owner's release sent again (its reply lost): RedisStore finds its token
            # where the first send left it and answers as that one did, changing nothing
            assert released, (record, fence)
            self._end((owner, key), completed=False)
            return
        if record is None and released:
            assert isinstance(self.store, DatabaseStore)  # as for complete
            current = True
        assert released == current, (record, fence)  # P3
        if released:
            self.model[key] = None
            self.last_release[key] = (owner, fence)
        self._end((owner, key), completed=False)

    @precondition(lambda self: self.fences)
    @rule(owner=OWNERS)
    def crash(self, owner: int) -> None:
        """The owner dies: it never renews, completes or releases again."""
        for held in [held for held in self.fences if held[0] == owner]:
            self._end(held, completed=False)
            del self.fences[held]

    @rule(seconds=TICKS)
    def tick(self, seconds: float) -> None:
        for key, record in self.model.items():
            if record is None:
                continue
            live = record.state == "in_progress" and record.lease_left > 0
            if live and record.lease_left <= seconds and (record.owner, key) in self.running:
                record.life.lease_ran_out_under_a_live_owner = True  # A1 broken
            age(self.store, self.scope, key, seconds)
            # in whole milliseconds, as the stores count: twelve ticks of LEASE / 3 in
            # floats leave 7e-15 s of a 200 s TTL, a record the store has expired
            record.lease_left = round(record.lease_left - seconds, 3)
            record.ttl_low = round(record.ttl_low - seconds, 3)
            record.ttl_high = round(record.ttl_high - seconds, 3)
            if record.ttl_high <= 0:
                self.model[key] = None
                self.last_release.pop(key, None)
            elif record.ttl_low <= 0:
                # the store renewed the expiry on takeover, or did not: ask it
                if self.store.lookup(self.scope, key, fingerprint="fp") is None:
                    self.model[key] = None
                    self.last_release.pop(key, None)
                else:
                    record.ttl_low = record.ttl_high

    # -- invariants ----------------------------------------------------------------------

    def _check_read(self, key: str) -> None:
        record = self.model[key]
        seen = self.store.lookup(self.scope, key, fingerprint="fp")
        if record is None:
            assert seen is None, (key, seen)  # an expired record is absent
        elif record.state == "completed":  # P4, P5: its one completion's response
            assert seen is not None and seen.status is ClaimStatus.COMPLETED
            assert seen.response is not None and seen.response.body == record.body
        else:
            assert seen is not None and seen.status is ClaimStatus.IN_PROGRESS, seen
            assert (seen.retry_after > 0) == (record.lease_left > 0), (record, seen)

    @invariant()
    def reads_agree_with_the_model(self) -> None:
        for key in KEYS:
            self._check_read(key)

    @invariant()
    def p1_the_effect_runs_once_unless_an_assumption_broke(self) -> None:
        for life in self.all_lives:
            assumptions_held = not (
                life.lease_ran_out_under_a_live_owner or life.effect_without_completion
            )
            assert life.effects <= 1 or not assumptions_held, life

    @invariant()
    def p2_one_completion_per_record(self) -> None:
        assert all(life.completions <= 1 for life in self.all_lives)


@dataclasses.dataclass
class Open:
    """The one attempt whose transaction is open: atomic mode's owner between its claim
    and its commit."""

    owner: int
    key: str
    fence: int
    atomic: Any  # the entered ``transaction.atomic`` block
    label: str  # its effect's row, counted after the commit
    effect: bool = False
    completed: bool = False
    body: bytes = b""


@dataclasses.dataclass
class Committed:
    fence: int
    body: bytes
    ttl_left: float


class AtomicProtocol(RuleBasedStateMachine):
    """Atomic mode's actions on a ``DatabaseStore``: the claim, the view's own write (the
    effect) and the completion inside one transaction, committed together or rolled back
    together by a crash."""

    store: DatabaseStore

    def __init__(self) -> None:
        super().__init__()
        self.scope = f"protocol-atomic-{uuid.uuid4().hex}"
        self.model: dict[str, Committed | None] = dict.fromkeys(KEYS)
        self.open: Open | None = None
        #: every attempt's effect label -> the effect rows it must have left committed
        self.effects: dict[str, int] = {}
        #: fences of attempts that ended (committed, replayed over or crashed)
        self.stale: list[tuple[str, int]] = []
        self.serial = 0

    def _effect_rows(self, label: str) -> int:
        return Effect.objects.using(self.store.using).filter(label=label).count()

    # -- the model's actions ------------------------------------------------------------

    @precondition(lambda self: self.open is None)
    @rule(owner=OWNERS, key=st.sampled_from(KEYS))
    def begin(self, owner: int, key: str) -> None:
        """The view's transaction opens and claims the key inside it."""
        block = transaction.atomic(using=self.store.using)
        block.__enter__()
        try:
            got = self.store.claim(self.scope, key, fingerprint="fp", lease=LEASE, ttl=TTL)
            record = self.model[key]
            if record is None:
                assert got.status is ClaimStatus.CLAIMED, got
                assert not got.taken_over  # no claim ever outlives its transaction
            else:  # P4: a completed record replays, and the transaction writes nothing
                assert got.status is ClaimStatus.COMPLETED, (record, got)
                assert got.response is not None and got.response.body == record.body
        except BaseException as exc:  # a failed step leaves no transaction open
            block.__exit__(type(exc), exc, exc.__traceback__)
            raise
        if record is None:
            self.serial += 1
            label = f"{self.scope}/{key}/{self.serial}"
            self.effects[label] = 0
            self.open = Open(owner, key, got.fence, block, label)
        else:
            block.__exit__(None, None, None)

    @precondition(lambda self: self.open is not None and not self.open.effect)
    @rule()
    def effect(self) -> None:
        """The view's own write, in the same transaction."""
        assert self.open is not None
        Effect.objects.using(self.store.using).create(label=self.open.label, amount=1)
        self.open.effect = True

    @precondition(lambda self: self.open is not None and not self.open.completed)
    @rule()
    def complete(self) -> None:
        assert self.open is not None
        self.serial += 1
        body = f"owner {self.open.owner}, completion {self.serial}".encode()
        done = self.store.complete(
            self.scope,
            self.open.key,
            fence=self.open.fence,
            response=StoredResponse(201, [], body),
            ttl=TTL,
        )
        assert done  # P3: the current owner's completion is accepted
        self.open.completed = True
        self.open.body = body

    @precondition(lambda self: self.open is not None and self.open.completed)
    @rule()
    def commit(self) -> None:
        """Claim, effect and completion commit together."""
        attempt = self.open
        assert attempt is not None
        attempt.atomic.__exit__(None, None, None)
        self.open = None
        self.model[attempt.key] = Committed(attempt.fence, attempt.body, TTL)
        self.effects[attempt.label] = int(attempt.effect)
        self.stale.append((attempt.key, attempt.fence))

    @precondition(lambda self: self.open is not None)
    @rule()
    def crash(self) -> None:
        """The owner dies (or its view raises) before the commit: all of it rolls back."""
        self._roll_back()

    def _roll_back(self) -> None:
        attempt = self.open
        if attempt is None:
            return
        self.open = None
        error = RuntimeError("the owner crashed")
        attempt.atomic.__exit__(RuntimeError, error, None)
        self.stale.append((attempt.key, attempt.fence))

    @precondition(lambda self: self.open is None and self.stale)
    @rule(data=st.data())
    def late_owner(self, data: Any) -> None:
        """P3: an ended attempt's completion and renewal are refused (its fence was rolled
        back with it, or its record is completed)."""
        key, fence = data.draw(st.sampled_from(self.stale))
        response = StoredResponse(200, [], b"late")
        assert not self.store.complete(self.scope, key, fence=fence, response=response, ttl=TTL)
        assert not self.store.extend(self.scope, key, fence=fence, lease=LEASE)

    @precondition(lambda self: self.open is None)
    @rule(key=st.sampled_from(KEYS))
    def peek(self, key: str) -> None:
        self._check_read(key)

    @precondition(lambda self: self.open is None)
    @rule(seconds=TICKS)
    def tick(self, seconds: float) -> None:
        for key, record in self.model.items():
            if record is None:
                continue
            age(self.store, self.scope, key, seconds)
            record.ttl_left -= seconds
            if record.ttl_left <= 0:
                self.model[key] = None

    def teardown(self) -> None:
        self._roll_back()  # a failed step leaves no transaction open

    # -- invariants ----------------------------------------------------------------------

    def _check_read(self, key: str) -> None:
        record = self.model[key]
        seen = self.store.lookup(self.scope, key, fingerprint="fp")
        if record is None:
            assert seen is None, (key, seen)  # never a claim outside its transaction
        else:  # P4, P5: its one committed completion's response
            assert seen is not None and seen.status is ClaimStatus.COMPLETED, seen
            assert seen.response is not None and seen.response.body == record.body

    @invariant()
    def reads_agree_with_the_model(self) -> None:
        if self.open is None:
            for key in KEYS:
                self._check_read(key)
        else:  # the transaction sees its own claim
            seen = self.store.lookup(self.scope, self.open.key, fingerprint="fp")
            assert seen is not None
            expected = ClaimStatus.COMPLETED if self.open.completed else ClaimStatus.IN_PROGRESS
            assert seen.status is expected, seen

    @invariant()
    def effects_commit_with_their_completion(self) -> None:
        """P1 with no assumption: each attempt's effect is committed exactly when its
        completion was, once at most; a crashed attempt left none."""
        if self.open is not None:
            return  # judged once the transaction ended
        for label, expected in self.effects.items():
            assert self._effect_rows(label) == expected, label


@pytest.fixture(
    params=[
        pytest.param("database", id="database"),
        pytest.param("redis", id="redis", marks=pytest.mark.redis),
        pytest.param("cache", id="cache"),
    ]
)
def protocol_store(request: pytest.FixtureRequest, db: Any) -> BaseStore:
    stores: dict[str, type[BaseStore]] = {
        "database": DatabaseStore,
        "redis": RedisStore,
        "cache": CacheStore,
    }
    return stores[request.param]()


def run_machine(store: BaseStore, examples: int, **extra: Any) -> None:
    """Run :class:`StoreProtocol` over ``store``: ``examples`` runs of up to 40 steps."""
    machine = type("Protocol", (StoreProtocol,), {"store": store})
    options = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], **extra}
    run_state_machine_as_test(
        machine, settings=settings(max_examples=examples, stateful_step_count=40, **options)
    )


def test_the_store_protocol_holds_under_any_sequence(protocol_store: BaseStore) -> None:
    run_machine(protocol_store, 50)


def run_atomic_machine(store: DatabaseStore, examples: int, **extra: Any) -> None:
    """Run :class:`AtomicProtocol` over ``store``: ``examples`` runs of up to 30 steps."""
    machine = type("AtomicProtocolOnTheStore", (AtomicProtocol,), {"store": store})
    options = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], **extra}
    run_state_machine_as_test(
        machine, settings=settings(max_examples=examples, stateful_step_count=30, **options)
    )


def test_the_atomic_protocol_holds_under_any_sequence(transactional_db: Any) -> None:
    """Atomic mode on the run's database, with real commits and rollbacks."""
    run_atomic_machine(DatabaseStore(), 40)


class CompletionLostStore(DatabaseStore):
    """A mutant: the completion reports success and writes nothing (as an update judged by
    matched rather than changed rows, or a wrong condition, would)."""

    def complete(self, scope: str, key: str, **kwargs: Any) -> bool:
        return True


class ReplayLostStore(DatabaseStore):
    """A mutant: a claim of a completed record replaces it (an expiry compared the wrong
    way), so the effect commits a second time."""

    def claim(self, scope: str, key: str, **kwargs: Any) -> Any:
        found = self.lookup(scope, key, fingerprint=kwargs["fingerprint"])
        if found is not None and found.status is ClaimStatus.COMPLETED:
            self.delete(scope, key)
        return super().claim(scope, key, **kwargs)


@pytest.mark.parametrize("mutant", [CompletionLostStore, ReplayLostStore])
def test_the_atomic_machine_catches_a_broken_store(
    mutant: type[DatabaseStore], transactional_db: Any
) -> None:
    with pytest.raises(AssertionError):
        run_atomic_machine(
            mutant(), 200, print_blob=False, report_multiple_bugs=False, phases=[Phase.generate]
        )


class FenceBlindStore(CacheStore):
    """A mutant: completion, release and renewal check the state but not the token."""

    def _owned(self, scope: str, key: str, fence: int) -> dict[str, Any] | None:
        record = self._get(self.record_key(scope, key))
        if record is None or record["state"] != "in_progress":
            return None
        return record


class LiveLeaseTakerStore(CacheStore):
    """A mutant: a claim that meets an in-progress record takes it over, lease or not."""

    def claim(self, scope: str, key: str, **kwargs: Any) -> Any:
        record = self._get(self.record_key(scope, key))
        if record is not None and record["state"] == "in_progress":
            self.raw.delete(self.record_key(scope, key))
        return super().claim(scope, key, **kwargs)


@pytest.mark.parametrize("mutant", [FenceBlindStore, LiveLeaseTakerStore])
def test_the_machine_catches_a_broken_store(mutant: type[BaseStore], db: Any) -> None:
    with pytest.raises(AssertionError):
        # a failure is all this asks: no shrinking
        run_machine(
            mutant(), 200, print_blob=False, report_multiple_bugs=False, phases=[Phase.generate]
        )
