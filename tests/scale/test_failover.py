"""Redis Cluster failover during a storm: a primary is killed (SIGKILL) while requests run.

RedisStore with ``wait_replicas=1``: a view runs only once its claim is on a
replica, so the replica promoted in the dead primary's place holds every claim whose
view ran. The storm's clients retry 5xx and 409 answers. What must hold:

* no key ever runs twice, during or after the failover (executions counted in an
  ``O_APPEND`` file, which no Redis failover or rollback can undo);
* every key that got a 2xx ran exactly once, and all its 2xx answers are the same bytes;
* keys on the surviving primaries are all served; keys of the dead primary may get
  5xx/503 and 409 (an owner that could not store its response leaves its claim in
  progress until its lease ends), never a second execution (the store follows the
  failover to the promoted replica: a MOVED reply or a dead primary makes the cluster
  client read the slots again);
* while the promoted primary has no replica, ``WAIT 1`` cannot be met: its keys are
  refused with 503 without running; once the dead node is back (as a replica), they run.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import override_settings

from idempotency.stores.redis import RedisStore
from tests.scale.servers import ClusterNode, RedisClusterServer
from tests.support.clusters import REDIS_STORE, cluster_caches, start_cluster
from tests.support.stores import using
from tests.support.storms import Storm, wait_until
from tests.testapp.executions import executions

pytestmark = [pytest.mark.timeout(240)]

SETTINGS = {
    **using(REDIS_STORE, cache="cluster", wait_replicas=1, wait_timeout=0.5),
    "MODE": "lease",
}


@pytest.fixture
def cluster() -> Iterator[RedisClusterServer]:
    """A cluster of its own: this test kills one of its nodes."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()


def _keys_on(cluster: RedisClusterServer, node: ClusterNode, count: int, prefix: str) -> list[str]:
    store = RedisStore(cache="cluster")
    keys: list[str] = []
    while len(keys) < count:
        key = f"{prefix}-{uuid.uuid4()}"
        if cluster.primary_of(store.record_key("scale", key)).port == node.port:
            keys.append(key)
    return keys


def test_killing_a_primary_during_a_storm_never_runs_a_key_twice(
    cluster: RedisClusterServer, execution_log: Path
) -> None:
    store = RedisStore(cache="cluster")
    victim = cluster.primary_of(store.record_key("scale", "anything"))
    survivors = [n for n in cluster.serving_primaries() if n is not victim]
    assert len(survivors) == 2
    on_victim = _keys_on(cluster, victim, 8, "victim")
    elsewhere = [k for n in survivors for k in _keys_on(cluster, n, 8, "other")]
    keys = on_victim + elsewhere
    killed_at: list[float] = []
    running: set[str] = set()  # the victim's keys whose view had started when it died

    def kill() -> None:
        # once the victim's first owners are inside the view (it then sleeps 1 s)
        assert wait_until(lambda: set(executions(execution_log)) & set(on_victim), timeout=60)
        running.update(set(executions(execution_log)) & set(on_victim))
        victim.kill()
        killed_at.append(time.monotonic())

    with override_settings(CACHES=cluster_caches(cluster), IDEMPOTENCY=SETTINGS):
        killer = threading.Thread(target=kill)
        killer.start()
        storm = Storm(keys, duplicates=3, url="/charge/?sleep=1", patience=8, pause=0.2).run()
        killer.join()

        counts = executions(execution_log)
        print(f"failover storm: {dict(storm.statuses())}; executions {sum(counts.values())}")
        # never twice
        assert max(counts.values()) == 1, counts
        assert set(counts) <= set(keys)
        for key in keys:
            bodies = {a.body for a in storm.successes(key)}
            if bodies:  # every 2xx answer's effect is recorded once
                assert counts[key] == 1
                assert len(bodies) == 1 and json.loads(bodies.pop())["key"] == key
        # the surviving primaries served all their keys
        assert all(storm.successes(key) for key in elsewhere), storm.statuses()
        # the kill hit the storm: owners of the dead primary's keys were inside the view
        # when it died, so their completions met the failover (the store follows it to
        # the promoted replica, or answers 5xx), and those keys were answered after it
        victim_answers = [a for a in storm.answers if a.key in running]
        assert running and killed_at
        assert any(a.at > killed_at[0] for a in victim_answers)

        # the replica took over the dead primary's slots
        promoted = cluster.primary_of(store.record_key("scale", on_victim[0]))
        assert promoted is not victim
        # ... with no replica left, WAIT 1 cannot be met: refused, never run
        lonely = _keys_on(cluster, promoted, 2, "lonely")
        refused = Storm(lonely, duplicates=2).run()
        statuses = {a.status for a in refused.answers}
        assert 503 in statuses and statuses <= {503, 409}  # 409: a duplicate saw the claim
        assert not set(executions(execution_log)) & set(lonely)

        # the dead node comes back (as the promoted primary's replica): service resumes
        victim.start()
        cluster.wait_until_healthy(time.monotonic() + 60, replicated=True)
        fresh = _keys_on(cluster, promoted, 4, "after") + lonely
        after = Storm(fresh, duplicates=3, patience=10, pause=0.2).run()
        assert all(after.successes(key) for key in fresh), after.statuses()

    final = executions(execution_log)
    assert max(final.values()) == 1, final
    assert all(final[key] == 1 for key in fresh)
    # no key of the first storm ran again later
    assert {k: final[k] for k in counts} == dict(counts)
