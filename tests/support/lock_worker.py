"""Child process of the lock tests (``multiprocessing`` spawn target).

Each child configures a minimal Django, waits for the start signal, then takes
the lock ``rounds`` times. Inside the critical section it counts the holders and
increments an unsynchronised shared counter with a read-sleep-write sequence: any
overlap of two holders would lose an increment or push the holder count past 1.
"""

from __future__ import annotations

import time
from typing import Any


def contend(
    backend: str,
    config: dict[str, Any],
    name: str,
    rounds: int,
    hold: float,
    shared: dict[str, Any],
) -> None:
    import django
    from django.conf import settings

    settings.configure(**config)
    django.setup()
    from idempotency.locks import lock

    holders, max_holders = shared["holders"], shared["max_holders"]
    counter, acquisitions = shared["counter"], shared["acquisitions"]
    shared["ready"].release()
    shared["go"].wait(60)
    for _ in range(rounds):
        with lock(name, timeout=30, wait=60, backend=backend):
            with holders.get_lock():
                holders.value += 1
                with max_holders.get_lock():
                    max_holders.value = max(max_holders.value, holders.value)
            value = counter.value  # read
            time.sleep(hold)  # real time: let an intruder interleave, if there were one
            counter.value = value + 1  # write
            with acquisitions.get_lock():
                acquisitions.value += 1
            with holders.get_lock():
                holders.value -= 1
