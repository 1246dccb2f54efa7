"""A private Redis (AOF on) SIGKILLed and restarted while retrying clients run: every key's
work runs once, no caller conflicts with itself, and no owner is told it went stale.

Each key has exactly one caller, a thread that retries its call until it gets a result (a
503 from the store, or an "in progress", is retried after a short pause). The work appends
a line per execution to a file: a counter outside the store, which a re-run cannot hide
from. Every fifth key's work fails on its first attempt, before its effect (the key is
released, and the caller calls again), so releases straddle the kills too. Any "in
progress" is a self-conflict (no one else uses the key), and any ``stale_owner`` signal a
false one (no owner's lease can run out in a short outage): each is also checked against
the record Redis holds, whose fence says whether that owner's completion or release went
through after all.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from idempotency import idempotent_function, signals
from idempotency.exceptions import CallInProgress, StoreUnavailable
from idempotency.stores.redis import RedisStore, as_text
from tests.support.faults import private_redis

pytestmark = pytest.mark.chaos

CALLERS = 8
KEYS_PER_CALLER = 10
KILLS = 3
LEASE = 4.0
#: Seconds Redis stays down on each kill, before its restart (which adds ~0.1 s).
OUTAGE = 1.2


def test_redis_killed_and_back_within_the_lease_runs_no_key_twice(tmp_path: Path) -> None:
    effects = tmp_path / "effects.log"
    stale: list[Any] = []
    conflicts: list[str] = []
    downtimes: list[float] = []
    lock = threading.Lock()
    called: list[str] = []

    def on_stale(**kwargs: Any) -> None:
        stale.append((kwargs["key"], kwargs.get("fence")))

    class Failed(Exception):
        """A first attempt's failure: the key is released."""

    failed: set[str] = set()

    signals.stale_owner.connect(on_stale, weak=False)
    with private_redis(aof=True) as server:
        store = RedisStore(server.url, socket_timeout=2, socket_connect_timeout=0.5)

        @idempotent_function(key=lambda key: key, store=store, lease=LEASE, wait=0)
        def charge(key: str) -> str:
            if key.endswith(("0", "5")) and key not in failed:
                failed.add(key)
                raise Failed(key)  # before the effect: released, and called again
            with lock, effects.open("a") as log:
                log.write(f"{key}\n")
            time.sleep(0.02)  # real time: the work: long enough for some to straddle a kill
            return key

        started = threading.Barrier(CALLERS + 1)
        done = threading.Event()

        def caller(n: int) -> None:
            # keys until the last restart is behind (and at least KEYS_PER_CALLER)
            started.wait()
            i = 0
            while i < KEYS_PER_CALLER or not done.is_set():
                key = f"c{n}-k{i}"
                i += 1
                with lock:
                    called.append(key)
                while True:
                    try:
                        assert charge(key) == key
                        break
                    except StoreUnavailable:
                        # real time: a client's pause while the real server restarts
                        time.sleep(0.05)
                    except Failed:
                        pass
                    except CallInProgress:
                        conflicts.append(key)
                        # real time: a client's retry pace while a key is in progress
                        time.sleep(0.2)

        def killer() -> None:
            started.wait()
            for _ in range(KILLS):
                time.sleep(0.6)  # real time: traffic between the outages
                down = time.monotonic()
                server.kill()
                time.sleep(OUTAGE)  # real time: the fault's length, not a wait for another thread
                server.start()  # AOF loaded, answering PING
                downtimes.append(time.monotonic() - down)
            time.sleep(0.3)  # real time: traffic after the last restart
            done.set()

        threads = [threading.Thread(target=caller, args=(n,)) for n in range(CALLERS)]
        kill_thread = threading.Thread(target=killer)
        for thread in [*threads, kill_thread]:
            thread.start()
        kill_thread.join(timeout=60)
        done.set()
        for thread in threads:
            thread.join(timeout=120)
        # each signal against Redis: the record's fence (a completion's) or its released
        # fence is the signalled owner's own when its write went through after all
        client = server.client()
        false_stale = []
        for key, fence in stale:
            record = client.hgetall(store.record_key("functions", key))  # type: ignore[attr-defined]
            if str(fence) in (as_text(record.get(b"fence")), as_text(record.get(b"rf"))):
                false_stale.append(key)
    signals.stale_owner.disconnect(on_stale)

    runs = Counter(effects.read_text().split())
    assert set(runs) == set(called) and len(called) >= CALLERS * KEYS_PER_CALLER
    assert failed and failed <= set(called)
    # every kill happened while the callers ran, each outage far shorter than the lease
    print(f"outages (s): {[round(d, 2) for d in downtimes]}")  # noqa: T201 - the measure
    assert len(downtimes) == KILLS and max(downtimes) < LEASE
    assert [key for key, count in runs.items() if count > 1] == []
    print(  # noqa: T201 - the measure
        f"keys {len(called)}, released first {len(failed)}, run twice "
        f"{sum(count > 1 for count in runs.values())}, self-conflicts {len(conflicts)}, "
        f"stale_owner {len(stale)} (false by Redis' record: {len(false_stale)})"
    )
    assert conflicts == []
    assert false_stale == []
    assert stale == []
