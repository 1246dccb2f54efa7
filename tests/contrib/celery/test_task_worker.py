"""IdempotentTask under a REAL Celery worker process (Redis broker, PostgreSQL test database).

Each test starts ``celery worker --pool=solo`` subprocesses on a queue of its own,
with ``DATABASE_URL`` pointing at pytest-django's test database, so the worker's
DatabaseStore records are the ones the test reads.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from idempotency.models import IdempotencyRecord
from idempotency.stores.base import ClaimStatus
from tests.support.counting import unique
from tests.support.storms import wait_until
from tests.support.workers import Worker
from tests.testapp import celery_app

pytestmark = [
    pytest.mark.server_db,
    pytest.mark.redis,
    pytest.mark.celery_worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
]


def postruns(counters: Any, task_id: str) -> list[dict[str, Any]]:
    return [json.loads(entry) for entry in counters.lrange(f"beyond:postrun:{task_id}", 0, -1)]


def effects(counters: Any, label: str) -> int:
    return int(counters.get(celery_app.key(label, "effects")) or 0)


def record(key: str) -> IdempotencyRecord | None:
    return IdempotencyRecord.objects.filter(scope="tasks", key=key).first()


def test_same_task_id_published_twice_runs_once(
    start_worker: Callable[..., Worker], counters: Any
) -> None:
    worker = start_worker()
    label = unique("dup")
    task_id = str(uuid.uuid4())
    for _ in range(2):
        celery_app.record_effect.apply_async((label,), task_id=task_id, queue=worker.queue)

    runs = wait_until(
        lambda: len(postruns(counters, task_id)) >= 2 and postruns(counters, task_id), timeout=30
    )
    assert runs, worker.output()
    assert [run["state"] for run in runs] == ["SUCCESS", "SUCCESS"]
    # the duplicate was acknowledged and answered with the first run's stored result
    assert runs[0]["retval"] == runs[1]["retval"] == {"label": label, "pid": worker.pid}
    assert effects(counters, label) == 1
    stored = record(task_id)
    assert stored is not None and stored.is_completed
    assert json.loads(bytes(stored.response_body)) == runs[0]["retval"]


def test_same_message_id_under_new_task_ids_runs_once_per_consumer(
    start_worker: Callable[..., Worker], counters: Any
) -> None:
    worker = start_worker()
    label = unique("msg")
    message_id = uuid.uuid4().hex
    task_ids = [str(uuid.uuid4()) for _ in range(3)]
    consumers = ["billing", "billing", "shipping"]
    for task_id, consumer in zip(task_ids, consumers, strict=True):
        celery_app.consume_message.apply_async(
            (message_id, consumer, label), task_id=task_id, queue=worker.queue
        )

    assert wait_until(lambda: all(postruns(counters, t) for t in task_ids), timeout=30), (
        worker.output()
    )
    assert [postruns(counters, t)[0]["state"] for t in task_ids] == ["SUCCESS"] * 3
    # billing ran once (its redelivery got the stored result), shipping once
    assert effects(counters, label) == 2
    assert postruns(counters, task_ids[1])[0]["retval"] == {
        "message_id": message_id,
        "consumer": "billing",
    }
    assert record(f"msg_{message_id}_billing") is not None
    assert record(f"msg_{message_id}_shipping") is not None


@pytest.mark.parametrize("task_name", ["flaky_autoretry", "flaky_manual"])
def test_failed_task_is_retried_by_celery_and_completes_once(
    start_worker: Callable[..., Worker], counters: Any, task_name: str
) -> None:
    worker = start_worker()
    task = getattr(celery_app, task_name)
    label = unique("flaky")
    task_id = str(uuid.uuid4())
    task.apply_async((label, 2), task_id=task_id, queue=worker.queue)

    assert wait_until(
        lambda: any(run["state"] == "SUCCESS" for run in postruns(counters, task_id)),
        timeout=30,
    ), worker.output()
    states = [run["state"] for run in postruns(counters, task_id)]
    assert states == ["RETRY", "RETRY", "SUCCESS"]
    assert int(counters.get(celery_app.key(label, "attempts"))) == 3
    assert effects(counters, label) == 1
    stored = record(task_id)
    assert stored is not None and stored.is_completed
    assert json.loads(bytes(stored.response_body)) == {"attempts": 3}

    # a later duplicate of the finished message is skipped, with the stored result
    task.apply_async((label, 2), task_id=task_id, queue=worker.queue)
    assert wait_until(lambda: len(postruns(counters, task_id)) == 4, timeout=20)
    assert postruns(counters, task_id)[-1]["retval"] == {"attempts": 3}
    assert effects(counters, label) == 1


def test_worker_killed_mid_task_is_redelivered_and_completes_once(
    start_worker: Callable[..., Worker], counters: Any
) -> None:
    """acks_late + SIGKILL: the broker redelivers; the redelivery waits out the dead
    worker's lease (self.retry with the lease's remainder), then takes the key over."""
    # the second worker must be up (a process importing Django and Celery: over 6 s on a
    # loaded 2-CPU CI machine) and the broker's visibility timeout (3 s) past, before the
    # lease runs out, for the redelivery to come early and be deferred
    lease = 15.0
    queue = unique("beyond-kill")
    first = start_worker(queue, BEYOND_SLOW_LEASE=str(lease))
    label = unique("kill")
    task_id = str(uuid.uuid4())
    # before the claim (after it, a stall of this process before it noticed the claim
    # would shorten the time measured)
    published = time.monotonic()
    celery_app.slow_effect.apply_async((label, 60), task_id=task_id, queue=queue)

    started = celery_app.key(label, "started")
    assert wait_until(lambda: counters.llen(started) == 1, timeout=30), first.output()
    owner = record(task_id)
    assert owner is not None and not owner.is_completed
    first.kill()

    second = start_worker(queue, BEYOND_SLOW_LEASE=str(lease))
    assert wait_until(lambda: effects(counters, label) >= 1, timeout=40), second.output()
    done_after = time.monotonic() - published
    assert wait_until(lambda: (r := record(task_id)) is not None and r.is_completed, timeout=10)
    second.drain()  # nothing queued before now runs it again

    assert effects(counters, label) == 1
    pids = [int(pid) for pid in counters.lrange(started, 0, -1)]
    assert pids == [first.pid, second.pid]
    # the redelivery came before the lease ran out: it was deferred, not dropped or run
    assert int(counters.get(f"beyond:retries:{task_id}") or 0) >= 1, second.output()
    assert done_after >= lease - 0.5
    runs = postruns(counters, task_id)
    assert runs[-1]["state"] == "SUCCESS" or any(run["state"] == "SUCCESS" for run in runs)
    stored = record(task_id)
    assert stored is not None
    assert json.loads(bytes(stored.response_body)) == {"label": label, "pid": second.pid}


@pytest.mark.parametrize(
    ("task_name", "seconds"),
    # the long body: past the first lease (6 s), so only renewals keep the key
    [("counted_lease", 1.0), ("counted_atomic", 1.0), ("counted_lease", 9.0)],
    ids=["lease", "atomic", "body-past-its-lease"],
)
def test_concurrent_deliveries_to_two_workers_run_the_body_once(
    start_worker: Callable[..., Worker], counters: Any, task_name: str, seconds: float
) -> None:
    """The same message delivered six times to two workers at once (a redelivery storm):
    the body starts once (counted in Redis as it starts), every delivery succeeds. With a
    body longer than its lease, the keep-alive holds the key meanwhile."""
    queue = unique("beyond-storm")
    workers = [start_worker(queue), start_worker(queue)]
    task = getattr(celery_app, task_name)
    label = unique("storm")
    task_id = str(uuid.uuid4())
    deliveries = 6
    for _ in range(deliveries):
        task.apply_async((label, seconds), task_id=task_id, queue=queue)

    def succeeded() -> int:
        return sum(run["state"] == "SUCCESS" for run in postruns(counters, task_id))

    done = wait_until(lambda: succeeded() >= deliveries, timeout=60)
    assert done, "\n".join(worker.output() for worker in workers)
    assert int(counters.get(celery_app.key(label, "executions")) or 0) == 1
    assert effects(counters, label) == 1
    successes = [run for run in postruns(counters, task_id) if run["state"] == "SUCCESS"]
    assert all(run["retval"] == {"label": label} for run in successes)
    # both workers took deliveries: the duplicates really were concurrent
    assert len({run["pid"] for run in postruns(counters, task_id)}) == 2


def test_deferring_a_duplicate_spends_no_retries_and_leaves_no_state(
    start_worker: Callable[..., Worker], counters: Any
) -> None:
    """Another delivery holds the key; this one is deferred until the lease passes. Its
    body then sees ``request.retries == 0`` and still has its whole budget (max_retries=1)
    for a real failure, and no ``override_max_retries`` was left on the task instance."""
    worker = start_worker()
    label = unique("defer")
    task = celery_app.deferred_then_flaky
    keyed = task.idempotent_call((label,), {})
    assert keyed is not None
    callee, key, answers = keyed
    holder = callee.job(task.idempotency_scope, key, answers)
    held = holder.store.claim(
        holder.scope,
        holder.key,
        fingerprint=holder.fingerprint,
        lease=holder.lease,
        ttl=holder.ttl,
        method=holder.method,
        route=holder.route,
    )
    assert held.status is ClaimStatus.CLAIMED
    task_id = str(uuid.uuid4())
    task.apply_async((label,), task_id=task_id, queue=worker.queue)

    assert wait_until(
        lambda: any(run["state"] == "SUCCESS" for run in postruns(counters, task_id)),
        timeout=40,
    ), worker.output()
    states = [run["state"] for run in postruns(counters, task_id)]
    # at least one deferral (RETRY before the body ever ran), one real retry, success
    assert states[-1] == "SUCCESS" and states.count("RETRY") >= 2, states
    assert "FAILURE" not in states
    seen = [int(v) for v in counters.lrange(celery_app.key(label, "retries_seen"), 0, -1)]
    assert seen == [0, 1]  # deferrals did not count: the body's first run is retry 0
    overrides = counters.lrange(celery_app.key(label, "override_seen"), 0, -1)
    assert [int(v) for v in overrides] == [0, 0]
    assert effects(counters, label) == 1


def test_a_chord_runs_each_part_and_its_body_once_even_when_delivered_twice(
    start_worker: Callable[..., Worker], counters: Any
) -> None:
    """A chord of IdempotentTasks on the Redis result backend. Publishing the very same
    chord again (every header and the body delivered twice, same task ids) runs no part
    again: the duplicates return the stored results, and the body's duplicate is skipped
    the same way, so the body's effect happens once."""
    from celery import chord

    worker = start_worker()
    label = unique("chord")
    header = [celery_app.chord_part.s(label, n).set(queue=worker.queue) for n in (1, 2, 3, 4)]
    body = celery_app.chord_sum.s(label).set(queue=worker.queue)
    workflow = chord(header, body)
    workflow.freeze()
    part_ids = [sig.id for sig in workflow.tasks.tasks]  # type: ignore[attr-defined]
    body_id = workflow.body.id
    sums = celery_app.key(label, "sums")

    workflow.apply_async()
    assert wait_until(lambda: counters.llen(sums) == 1, timeout=40), worker.output()
    assert int(counters.lindex(sums, 0)) == 1 + 4 + 9 + 16
    assert effects(counters, label) == 4

    workflow.apply_async()  # the same messages again
    assert wait_until(
        lambda: all(len(postruns(counters, task_id)) >= 2 for task_id in part_ids), timeout=40
    ), worker.output()
    worker.drain()  # a second body, were one dispatched (before the parts' postrun), has run
    for task_id in part_ids:
        runs = postruns(counters, task_id)
        assert [run["state"] for run in runs] == ["SUCCESS", "SUCCESS"]
        assert runs[0]["retval"] == runs[1]["retval"]
    assert effects(counters, label) == 4
    assert counters.llen(sums) == 1  # the body's effect happened once
    body_runs = postruns(counters, body_id)
    assert body_runs and all(run["retval"] == 30 for run in body_runs)


def test_redelivery_with_other_arguments_fails_without_running_or_retrying(
    start_worker: Callable[..., Worker], counters: Any
) -> None:
    """One message key, tampered arguments: FAILURE at once, even under autoretry_for."""
    worker = start_worker()
    message_id, label = uuid.uuid4().hex, unique("strict")
    first, same, tampered = (str(uuid.uuid4()) for _ in range(3))
    for task_id, amount in ((first, "1.00"), (same, "1.00"), (tampered, "9.99")):
        celery_app.strict_consumer.apply_async(
            (message_id, amount, label), task_id=task_id, queue=worker.queue
        )
        assert wait_until(lambda t=task_id: postruns(counters, t), timeout=30), worker.output()

    assert [run["state"] for run in postruns(counters, first)] == ["SUCCESS"]
    assert [run["state"] for run in postruns(counters, same)] == ["SUCCESS"]
    assert postruns(counters, same)[0]["retval"] == {"message_id": message_id, "amount": "1.00"}
    assert [run["state"] for run in postruns(counters, tampered)] == ["FAILURE"]
    assert counters.get(f"beyond:retries:{tampered}") is None  # never retried
    assert "ArgumentsMismatch" in str(postruns(counters, tampered)[0]["retval"])
    assert effects(counters, label) == 1
    stored = record(f"pay_{message_id}")
    assert stored is not None and stored.is_completed
