"""A private Redis (AOF on) SIGKILLed and restarted while retrying clients run: every key's
work runs once, no caller conflicts with itself, and no owner is told it went stale.

Each key has exactly one caller, a thread that retries its call until it gets a result (a
503 from the store, or an "in progress", is retried after a short pause). The work appends
a line per execution to a file: a counter outside the store, which a re-run cannot hide
from. Any "in progress" is a self-conflict (no one else uses the key), and any
``stale_owner`` signal a false one (no owner's lease can run out in a short outage).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from idempotency import idempotent_function, signals
from idempotency.exceptions import InProgress, StoreUnavailable
from idempotency.stores.redis import RedisStore
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
        stale.append(kwargs.get("fence"))

    signals.stale_owner.connect(on_stale, weak=False)
    with private_redis(aof=True) as server:
        store = RedisStore(server.url, socket_timeout=2, socket_connect_timeout=0.5)

        @idempotent_function(key=lambda key: key, store=store, lease=LEASE, wait=0)
        def charge(key: str) -> str:
            with lock, effects.open("a") as log:
                log.write(f"{key}\n")
            time.sleep(0.02)  # the work: long enough for some to straddle a kill
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
                        time.sleep(0.05)
                    except InProgress:
                        conflicts.append(key)
                        time.sleep(0.2)

        def killer() -> None:
            started.wait()
            for _ in range(KILLS):
                time.sleep(0.6)  # traffic between the outages
                down = time.monotonic()
                server.kill()
                time.sleep(OUTAGE)  # the fault's length, not a wait for another thread
                server.start()  # AOF loaded, answering PING
                downtimes.append(time.monotonic() - down)
            time.sleep(0.3)
            done.set()

        threads = [threading.Thread(target=caller, args=(n,)) for n in range(CALLERS)]
        kill_thread = threading.Thread(target=killer)
        for thread in [*threads, kill_thread]:
            thread.start()
        kill_thread.join(timeout=60)
        done.set()
        for thread in threads:
            thread.join(timeout=120)
    signals.stale_owner.disconnect(on_stale)

    runs = Counter(effects.read_text().split())
    assert set(runs) == set(called) and len(called) >= CALLERS * KEYS_PER_CALLER
    # every kill happened while the callers ran, each outage far shorter than the lease
    print(f"outages (s): {[round(d, 2) for d in downtimes]}")  # noqa: T201 - the measure
    assert len(downtimes) == KILLS and max(downtimes) < LEASE
    assert [key for key, count in runs.items() if count > 1] == []
    assert conflicts == []
    assert stale == []
