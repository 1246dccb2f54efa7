"""@idempotent_django_task under REAL django-tasks-db workers (``manage.py db_worker``
subprocesses on pytest-django's test database, PostgreSQL or MySQL/MariaDB).

Each body appends one line to the executions file per run (which no rollback undoes)
and writes one Effect row (no unique constraint: a second run would show as a second
row). Each test has a queue of its own, so its workers take only its tasks.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from idempotency.contrib.django_tasks import DEFERRED_KEY
from idempotency.models import IdempotencyRecord
from tests.support.counting import unique
from tests.support.effects import effects
from tests.support.storms import wait_until
from tests.support.task_workers import DbWorker, db_worker_env
from tests.testapp import djtasks

pytestmark = [
    pytest.mark.server_db,
    pytest.mark.task_worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(180),
]

#: The lease of the lease-mode tasks in the workers (seconds), renewed every third of it:
#: long enough for a renewal in a stalled worker to run 4 s late, and for the killed run's
#: lease to outlast the second worker taking the new result, on a loaded CI machine (3 s
#: allowed 2 s: a late renewal let a duplicate in, a late pickup found the lease gone)
LEASE = 6.0
DEFERRED = "idempotency.exceptions.TaskDeferred"


@pytest.fixture
def start_worker(
    transactional_db: None, tmp_path: Path, execution_log: Path
) -> Iterator[Callable[[str], DbWorker]]:
    """Start ``db_worker`` processes on a queue; stopped at teardown (before the test
    database is flushed: ``transactional_db`` comes first)."""
    workers: list[DbWorker] = []

    def start(queue: str) -> DbWorker:
        env = db_worker_env(execution_log, IDEMPOTENCY_TEST_TASK_LEASE=str(LEASE))
        worker = DbWorker(queue=queue, env=env, log=tmp_path / f"worker-{len(workers)}.log")
        workers.append(worker)
        return worker.start()

    yield start
    for worker in workers:
        worker.stop()


def results(queue: str) -> list[Any]:
    from django_tasks_db.models import DBTaskResult

    return list(DBTaskResult.objects.filter(queue_name=queue).order_by("enqueued_at"))


def settled(queue: str) -> bool:
    """Every result of the queue has finished (deferred copies included)."""
    found = results(queue)
    return bool(found) and all(r.status in ("SUCCESSFUL", "FAILED") for r in found)


def runs_of(log: Path, label: str) -> list[int]:
    """The pids of the workers that ran the body for ``label``, in order."""
    if not log.exists():
        return []
    return [
        int(line.split()[1]) for line in log.read_text().splitlines() if line.split()[0] == label
    ]


def errors(result: Any) -> list[str]:
    """The exception classes a finished result failed with (a DBTaskResult's)."""
    return [result.exception_class_path] if result.exception_class_path else []


def output(*workers: DbWorker) -> str:
    return "\n".join(worker.output() for worker in workers)


@pytest.mark.parametrize(
    ("task_name", "prefix"),
    [("by_label", "receipt"), ("by_label_lease", "lease")],
    ids=["atomic", "lease"],
)
def test_a_worker_killed_mid_task_then_enqueued_again_effects_once(
    start_worker: Callable[[str], DbWorker], execution_log: Path, task_name: str, prefix: str
) -> None:
    """SIGKILL mid-task leaves the result RUNNING (django-tasks-db never runs it again);
    the task enqueued again under a new result id with the same business key runs once.
    In atomic mode the killed run's claim and effect rolled back with its connection; in
    lease mode the new run is deferred (run_after) until the dead run's lease has passed."""
    task = getattr(djtasks, task_name).using(queue_name=unique("djq-kill"))
    queue = task.queue_name
    label = unique("kill")
    first = start_worker(queue)
    killed = task.enqueue(label, 60)
    assert wait_until(lambda: runs_of(execution_log, label), timeout=60), first.output()
    second = start_worker(queue)  # idle: the killed result is RUNNING, never ready again
    killed_at = time.monotonic()
    first.kill()
    again = task.enqueue(label, 0)
    assert wait_until(lambda: effects(label) >= 1 and settled_but(queue, killed.id), timeout=60), (
        output(first, second)
    )
    done_after = time.monotonic() - killed_at
    # a third enqueue of the finished work: answered from the record
    third = task.enqueue(label, 0)
    assert wait_until(lambda: settled_but(queue, killed.id), timeout=30), second.output()

    assert effects(label) == 1
    assert runs_of(execution_log, label) == [first.pid, second.pid]
    killed.refresh()
    assert killed.status == "RUNNING"  # the dead worker's: never finished
    third.refresh()
    assert third.status == "SUCCESSFUL"
    assert third.return_value == {"label": label, "pid": second.pid}
    record = IdempotencyRecord.objects.get(scope="tasks", key=f"{prefix}:{label}")
    assert record.is_completed
    again.refresh()
    if task_name == "by_label_lease":
        # the new result came while the dead run's lease was live: deferred, not run
        assert again.status == "FAILED", output(second)
        assert [e.exception_class_path for e in again.errors] == [DEFERRED]
        # the new run waited for the dead run's lease: the keep-alive renews it every third
        # of it, so two thirds were left when the worker died, one third even if its last
        # renewals ran late (a worker stalled on a loaded machine)
        assert done_after >= LEASE / 3
    else:
        assert again.status == "SUCCESSFUL"
        assert again.return_value == third.return_value


def settled_but(queue: str, killed_id: Any) -> bool:
    """Every result of the queue but the killed one has finished."""
    found = [r for r in results(queue) if str(r.id) != str(killed_id)]
    return bool(found) and all(r.status in ("SUCCESSFUL", "FAILED") for r in found)


@pytest.mark.parametrize(
    "task_name", ["flaky", "flaky_outer", "flaky_async"], ids=["under-task", "over-task", "async"]
)
def test_a_failed_task_enqueued_again_under_a_new_result_id_effects_once(
    start_worker: Callable[[str], DbWorker], execution_log: Path, task_name: str
) -> None:
    """In either decorator order, and as an async task: the failure released the key,
    the task enqueued again ran, and a third enqueue answered from the record."""
    task = getattr(djtasks, task_name).using(queue_name=unique("djq-flaky"))
    label = unique("flaky")
    worker = start_worker(task.queue_name)
    failed = task.enqueue(label, 1)
    assert wait_until(lambda: settled(task.queue_name), timeout=60), worker.output()
    failed.refresh()
    assert failed.status == "FAILED"
    assert [e.exception_class_path for e in failed.errors] == ["builtins.RuntimeError"]

    retried = task.enqueue(label, 1)
    assert wait_until(lambda: settled(task.queue_name), timeout=60), worker.output()
    duplicate = task.enqueue(label, 1)
    assert wait_until(lambda: settled(task.queue_name), timeout=60), worker.output()

    retried.refresh()
    duplicate.refresh()
    assert retried.id != failed.id
    assert retried.status == duplicate.status == "SUCCESSFUL"
    assert retried.return_value == duplicate.return_value == {"label": label, "tries": 2}
    assert effects(label) == 1
    assert len(runs_of(execution_log, label)) == 2  # the failure and its retry


def test_a_result_delivered_again_while_it_runs_is_deferred_under_its_key(
    start_worker: Callable[[str], DbWorker], execution_log: Path
) -> None:
    """A backend that redelivers a running result (a visibility timeout) runs the same
    result id twice at once; the second run is deferred as a copy carrying the key (the
    result id), which answers from the record once the first has finished."""
    from django_tasks_db.models import DBTaskResult

    task = djtasks.by_result_id_lease.using(queue_name=unique("djq-redeliver"))
    label = unique("redeliver")
    workers = [start_worker(task.queue_name) for _ in range(2)]
    result = task.enqueue(label, 3)
    assert wait_until(lambda: runs_of(execution_log, label), timeout=60), output(*workers)
    # redelivered: ready again while its first delivery still runs; the idle worker takes it
    DBTaskResult.objects.filter(id=result.id).update(status="READY")

    def copies() -> list[Any]:
        return [r for r in results(task.queue_name) if str(r.id) != str(result.id)]

    # a copy that finds the key still in progress is deferred again: a chain of copies,
    # each carrying the key, ending in one that answers from the record
    assert wait_until(
        lambda: (
            any(c.status == "SUCCESSFUL" for c in copies())
            and all(c.status in ("SUCCESSFUL", "FAILED") for c in copies())
        ),
        timeout=60,
    ), output(*workers)
    ran = runs_of(execution_log, label)
    assert effects(label) == 1
    assert len(ran) == 1
    assert all(c.args_kwargs["kwargs"] == {DEFERRED_KEY: str(result.id)} for c in copies())
    assert all(errors(c) == [DEFERRED] for c in copies() if c.status == "FAILED")
    answered = [c for c in copies() if c.status == "SUCCESSFUL"]
    assert len(answered) == 1
    assert answered[0].task_result.return_value == {"label": label, "pid": ran[0]}


@pytest.mark.parametrize("task_name", ["by_label", "by_label_lease"], ids=["atomic", "lease"])
def test_concurrent_enqueues_of_one_business_key_run_once(
    start_worker: Callable[[str], DbWorker], execution_log: Path, task_name: str
) -> None:
    """Six enqueues of one business key at once (threads behind a barrier), taken by
    three workers: the body runs once and every result answers with its value."""
    task = getattr(djtasks, task_name).using(queue_name=unique("djq-storm"))
    label = unique("storm")
    workers = [start_worker(task.queue_name) for _ in range(3)]
    enqueues = 6
    barrier = threading.Barrier(enqueues)
    ids: list[str] = []

    def enqueue() -> None:
        from django.db import connection

        try:
            barrier.wait(10)
            ids.append(str(task.enqueue(label, 1).id))
        finally:
            connection.close()

    threads = [threading.Thread(target=enqueue) for _ in range(enqueues)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(ids) == enqueues
    assert wait_until(lambda: settled(task.queue_name), timeout=90), output(*workers)

    found = results(task.queue_name)
    assert effects(label) == 1
    assert len(runs_of(execution_log, label)) == 1
    succeeded = [r for r in found if r.status == "SUCCESSFUL"]
    values = {tuple(sorted(r.task_result.return_value.items())) for r in succeeded}
    assert len(values) == 1
    deferred = [r for r in found if r.status == "FAILED"]
    assert all(errors(r) == [DEFERRED] for r in deferred)
    # every enqueue ended in a success, itself or through its deferred copies
    assert len(succeeded) == enqueues
    # the duplicates overlapped: several workers took them, two of them at once
    assert len({w for r in found for w in r.worker_ids}) >= 2
    assert any(
        a.started_at < b.finished_at and b.started_at < a.finished_at
        for a, b in itertools.combinations(found, 2)
    )
