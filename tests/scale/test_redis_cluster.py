"""Redis Cluster (3 primaries, 3 replicas, started here): the response cache, submit
tokens and locks through redis-py's cluster client, storms counted by execution, WAIT
durability, and no CROSSSLOT anywhere (the store contract runs on the cluster in
``tests/stores/test_contract.py``, as its ``redis-cluster`` store).

(``python -m tests.scale.launch cluster`` also runs every Redis-marked suite on a cluster.)
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django_redis import get_redis_connection

from idempotency import lock
from idempotency.exceptions import SubmitTokenUsed
from idempotency.locks import RedisLockBackend
from idempotency.redis_cluster import ClusterConnectionFactory
from idempotency.stores.base import ClaimStatus, StoredResponse
from idempotency.stores.database import DatabaseStore
from idempotency.stores.redis import RedisStore
from idempotency.tokens import RedisTokens, consume_submit_token, issue_submit_token
from tests.scale.servers import RedisClusterServer
from tests.support.clusters import crossslot_errors
from tests.support.stores import REDIS_STORE, using
from tests.support.storms import Storm, run_threads, wait_until
from tests.testapp.executions import executions

# no ``redis`` mark: these tests need no REDIS_URL, only redis-server to start the cluster
pytestmark = [pytest.mark.django_db]


def roles(cluster: RedisClusterServer) -> Counter[str]:
    """The cluster's nodes by role, as its first node sees them (a failed one as failed)."""
    text = cluster.nodes[0].client().execute_command("CLUSTER", "NODES")
    text = text.decode() if isinstance(text, bytes) else str(text)
    flags = [line.split()[2].split(",") for line in text.splitlines() if line.strip()]
    return Counter(
        "failed" if "fail" in f or "fail?" in f else "replica" if "slave" in f else "primary"
        for f in flags
    )


def test_the_client_is_the_cluster_client(on_cluster: RedisClusterServer) -> None:
    from redis.cluster import RedisCluster

    client = get_redis_connection("cluster")
    assert isinstance(client, RedisCluster)
    # on a loaded machine a node may miss its 1 s node timeout and be failed over for a
    # moment; the topology converges back to 3 + 3, which is what this asserts
    expected = {"primary": 3, "replica": 3}
    assert wait_until(lambda: roles(on_cluster) == expected, timeout=30), roles(on_cluster)
    assert len(client.get_primaries()) == 3
    assert client is get_redis_connection("cluster")  # one client per process


def test_replica_reads_are_refused() -> None:
    with pytest.raises(ImproperlyConfigured, match="replicas"):
        ClusterConnectionFactory({"CLUSTER_KWARGS": {"read_from_replicas": True}})


def test_records_spread_over_the_primaries_one_slot_each(on_cluster: RedisClusterServer) -> None:
    store = RedisStore(cache="cluster")
    client = get_redis_connection("cluster")
    nodes = set()
    for i in range(30):
        record = store.record_key("user:1", f"spread-{i}")
        assert record.count("{") == 1  # one hash tag: the record is one slot
        assert store.claim("user:1", f"spread-{i}", fingerprint="f", lease=5, ttl=60).owned
        nodes.add(client.get_node_from_key(record).name)
    assert len(nodes) == 3


# -- response cache, tokens, locks --------------------------------------------------------


def test_response_cache_on_the_cluster_replays_without_sql(
    on_cluster: RedisClusterServer,
    django_assert_num_queries: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    store = DatabaseStore(response_cache="cluster")
    response = StoredResponse(201, [("Content-Type", "application/json")], b'{"ok": true}')
    with django_capture_on_commit_callbacks(execute=True), store.atomic():
        inserted = store.insert_completed(
            "user:1", "cached", fingerprint="f", response=response, ttl=60
        )
    assert inserted
    first = store.lookup("user:1", "cached", fingerprint="f")  # fills the cache
    assert first is not None and first.response == response
    with django_assert_num_queries(0):
        again = store.lookup("user:1", "cached", fingerprint="f")
    assert again is not None and again.response == response
    store.delete("user:1", "cached")
    assert store.response_cache is not None
    assert store.response_cache.raw().get(store.response_cache.key("user:1", "cached")) is None


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_consumptions_of_a_token_one_wins(
    on_cluster: RedisClusterServer,
) -> None:
    token = issue_submit_token(user_or_scope="user:9", purpose="checkout", ttl=30)
    token_key, used_key = RedisTokens().keys("x" * 64)
    client = get_redis_connection("cluster")
    assert client.keyslot(token_key) == client.keyslot(used_key)

    def consume(_index: int) -> str:
        try:
            consume_submit_token(token=token, user_or_scope="user:9", purpose="checkout")
            return "won"
        except SubmitTokenUsed:
            return "used"

    outcomes = run_threads(20, consume)
    assert Counter(outcomes) == {"won": 1, "used": 19}


def test_locks_exclude_each_other_and_fence_release(on_cluster: RedisClusterServer) -> None:
    name = f"cluster-{uuid.uuid4()}"
    holders, peak, inside = [0], [0], threading.Lock()
    acquired: list[int] = []

    def work(i: int) -> None:
        for _ in range(5):
            with lock(name, timeout=5, wait=10):
                with inside:
                    holders[0] += 1
                    peak[0] = max(peak[0], holders[0])
                acquired.append(i)
                with inside:
                    holders[0] -= 1

    assert run_threads(8, work) == [None] * 8
    assert peak[0] == 1 and len(acquired) == 40
    held = lock(name, timeout=5)
    assert held.acquire()
    client = get_redis_connection("cluster")
    client.set(RedisLockBackend().key(name), b"someone-else")
    assert held.release() is False  # never frees another owner's lock
    assert client.get(RedisLockBackend().key(name)) == b"someone-else"


# -- storms ---------------------------------------------------------------------------------


def _assert_exactly_once(storm: Storm, log: Path) -> None:
    counts = executions(log)
    assert counts == dict.fromkeys(storm.keys, 1), counts
    for key in storm.keys:
        bodies = {a.body for a in storm.successes(key)}
        assert len(bodies) == 1, bodies  # the first answer, replayed byte for byte
        assert json.loads(bodies.pop())["key"] == key
    assert set(storm.statuses()) <= {201, 409}, storm.statuses()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("wait_replicas", [0, 1], ids=["async-replication", "wait-1-replica"])
def test_storm_on_the_cluster_runs_each_key_once(
    on_cluster: RedisClusterServer, execution_log: Path, wait_replicas: int
) -> None:
    keys = [f"storm-{uuid.uuid4()}" for _ in range(12)]
    # WAIT returns once a replica has acknowledged: the default 0.5 s bound answered 503
    # (which fails the storm) whenever a replica of a loaded machine took longer
    config = using(REDIS_STORE, cache="cluster", wait_replicas=wait_replicas, wait_timeout=10)
    with override_settings(IDEMPOTENCY=config):
        storm = Storm(keys, duplicates=8, url="/charge/?sleep=0.05").run()
        # and once more, after completion: every key replays
        late = Storm(keys, duplicates=2, url="/charge/?sleep=0.05").run()
    print(f"cluster storm (WAIT {wait_replicas}): {dict(storm.statuses())}")
    _assert_exactly_once(storm, execution_log)
    assert all(a.status == 201 and a.replayed for a in late.answers)
    assert {a.key: a.body for a in late.answers} == {k: storm.successes(k)[0].body for k in keys}


@pytest.mark.django_db(transaction=True)
def test_claim_not_replicated_in_time_is_released_and_answered_503(
    on_cluster: RedisClusterServer, execution_log: Path
) -> None:
    key = f"nd-{uuid.uuid4()}"
    # each primary has one replica: asking for two can never be satisfied
    with override_settings(
        IDEMPOTENCY=using(REDIS_STORE, cache="cluster", wait_replicas=2, wait_timeout=0.05)
    ):
        refused = Storm([key], duplicates=1).run().answers[0]
    assert refused.status == 503
    problem = json.loads(refused.body)
    assert problem["code"] == "idempotency-store-not-durable"
    assert problem["status"] == 503
    assert executions(execution_log) == {}  # the view never ran
    store = RedisStore(cache="cluster")
    assert store.lookup("scale", key, fingerprint="") is None  # released
    # a bound no replica of a loaded machine misses (WAIT returns at its acknowledgement)
    durable = using(REDIS_STORE, cache="cluster", wait_replicas=1, wait_timeout=10)
    with override_settings(IDEMPOTENCY=durable):
        assert Storm([key], duplicates=1).run().answers[0].status == 201
    assert executions(execution_log) == {key: 1}


def test_store_options_override_the_wait_settings(on_cluster: RedisClusterServer) -> None:
    # a bound no replica of a loaded machine misses (WAIT returns at its acknowledgement)
    store = RedisStore(cache="cluster", wait_replicas=1, wait_timeout=10)
    assert (store.wait_replicas, store.wait_timeout) == (1, 10.0)
    claim = store.claim("user:1", "opt", fingerprint="f", lease=5, ttl=60)
    assert claim.status is ClaimStatus.CLAIMED
    response = StoredResponse(200, [], b"ok")
    assert store.complete("user:1", "opt", fence=claim.fence, response=response, ttl=60)
    assert store.save_recovery_point("user:1", "opt", fence=claim.fence, name="x") is False


# -- last: nothing above hit CROSSSLOT -----------------------------------------------------


def test_no_command_on_the_cluster_ever_raised_crossslot(redis_cluster: RedisClusterServer) -> None:
    """Every script and command of this module ran on one slot: no node counted a
    CROSSSLOT error (the store contract checks the same after each of its cluster tests)."""
    assert crossslot_errors(redis_cluster) == []
    commands = 0
    for node in redis_cluster.live_nodes():
        stats = node.client().info("commandstats")
        commands += sum(v["calls"] for k, v in stats.items() if k in {"cmdstat_evalsha"})
    assert commands > 50  # the scripts did run here (this module's alone: about 75)
