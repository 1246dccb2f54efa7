"""@idempotent_django_task in one process: keys, replays, deferral, misuse (Django's
immediate and dummy task backends; the real worker: test_django_tasks_worker.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from idempotency import idempotent_function
from idempotency.contrib.django_tasks import DEFERRED_KEY, idempotent_django_task
from idempotency.exceptions import (
    ArgumentsMismatch,
    CallInProgress,
    ImproperlyApplied,
    KeyPartMissing,
    StoreUnavailable,
    TaskDeferred,
)
from idempotency.models import IdempotencyRecord
from tests.support.counting import unique
from tests.support.effects import effects
from tests.support.faults import dead_redis_store
from tests.support.stores import CACHE_STORE, using
from tests.testapp import djtasks
from tests.testapp.executions import executions

try:
    from django.tasks import TaskResultStatus, task_backends
    from django.tasks.base import Task, TaskContext
except ImportError:  # Django 5.2: the backport
    from django_tasks import TaskResultStatus, task_backends  # type: ignore[no-redef,import-not-found,unused-ignore]  # one of the two
    from django_tasks.base import Task, TaskContext  # type: ignore[no-redef,import-not-found,unused-ignore]  # is there

pytestmark = pytest.mark.django_db(transaction=True)


def runs(log: Path, label: str) -> int:
    return sum(count for line, count in executions(log).items() if line.split()[0] == label)


@pytest.fixture
def dummy() -> Iterator[Any]:
    backend = task_backends["dummy"]
    backend.clear()
    yield backend
    backend.clear()


def run_result(result: Any) -> Any:
    """Run one enqueued result as a worker would (its task, its context, its arguments)."""
    task_ = result.task
    if task_.takes_context:
        return task_.call(TaskContext(task_result=result), *result.args, **result.kwargs)
    return task_.call(*result.args, **result.kwargs)


# -- keys and replays --------------------------------------------------------------------


def test_a_business_key_runs_once_across_result_ids(execution_log: Path) -> None:
    label = unique("biz")
    first = djtasks.on_immediate.enqueue(label)
    second = djtasks.on_immediate.enqueue(label)

    assert first.id != second.id
    assert first.status == second.status == TaskResultStatus.SUCCESSFUL
    assert first.return_value == second.return_value
    assert runs(execution_log, label) == 1
    assert effects(label) == 1


def test_the_result_id_is_the_key_by_default(dummy: Any, execution_log: Path) -> None:
    label = unique("rid")
    result = djtasks.on_dummy_by_result_id.enqueue(label)
    again = djtasks.on_dummy_by_result_id.enqueue(label)

    # the same result delivered twice: one run; the same work under a new result id: two
    assert run_result(result) == run_result(result)
    run_result(again)
    assert effects(label) == 2
    assert runs(execution_log, label) == 2
    assert set(IdempotencyRecord.objects.filter(scope="tasks").values_list("key", flat=True)) >= {
        result.id,
        again.id,
    }


def test_a_replay_returns_the_first_runs_typed_result(dummy: Any, execution_log: Path) -> None:
    label = unique("typed")
    assert run_result(djtasks.price.enqueue(label)) == Decimal("10.10")
    replayed = run_result(djtasks.price.enqueue(label))

    assert replayed == Decimal("10.10") and isinstance(replayed, Decimal)
    assert runs(execution_log, label) == 1
    stored = IdempotencyRecord.objects.get(scope="tasks", key=f"price:{label}")
    assert b'"decimal"' in bytes(stored.response_body)


def test_other_arguments_under_one_business_key_are_refused(
    dummy: Any, execution_log: Path
) -> None:
    label = unique("mismatch")
    flaky = djtasks.flaky.using(backend="dummy")
    run_result(flaky.enqueue(label, 0))
    with pytest.raises(ArgumentsMismatch):
        run_result(flaky.enqueue(label, 1))
    assert effects(label) == 1


def test_disabled_runs_every_body(execution_log: Path) -> None:
    label = unique("off")
    with override_settings(IDEMPOTENCY={"ENABLED": False}):
        djtasks.on_immediate.enqueue(label)
        djtasks.on_immediate.enqueue(label)
    assert effects(label) == 2


def test_an_async_task_runs_once_per_key(dummy: Any, execution_log: Path) -> None:
    label = unique("async")
    first = run_result(djtasks.on_dummy_async.enqueue(label))
    assert run_result(djtasks.on_dummy_async.enqueue(label)) == first
    assert runs(execution_log, label) == 1
    assert effects(label) == 1


def test_an_async_run_in_progress_elsewhere_is_deferred(
    dummy: Any, held: Any, execution_log: Path
) -> None:
    label = unique("async-defer")
    first = djtasks.on_dummy_async.enqueue(label)
    held(lambda: run_result(first))

    with pytest.raises(TaskDeferred) as deferred:
        run_result(djtasks.on_dummy_async.enqueue(label))
    assert dummy.results[-1].id == deferred.value.deferred_id
    assert dummy.results[-1].args == [label]


# -- both decorator orders ---------------------------------------------------------------


@pytest.mark.parametrize(
    "task_", [djtasks.outer_by_label, djtasks.by_label], ids=["outer", "inner"]
)
def test_both_orders_give_a_task_that_runs_the_idempotent_function(task_: Any) -> None:
    assert isinstance(task_, Task)
    assert task_.module_path == f"tests.testapp.djtasks.{task_.func.__name__}"
    assert getattr(task_.func, "idempotent_django_task", False)


def test_over_task_keeps_the_tasks_options_and_runs_once(dummy: Any, execution_log: Path) -> None:
    assert djtasks.outer_by_result_id.takes_context
    assert djtasks.outer_by_result_id.backend == "dummy"
    label = unique("outer")
    first = djtasks.outer_by_label.enqueue(label)
    assert djtasks.outer_by_label.enqueue(label).return_value == first.return_value
    assert effects(label) == 1
    result = djtasks.outer_by_result_id.enqueue(label)
    run_result(result)
    run_result(result)
    assert effects(label) == 2


# -- a run whose key is in progress elsewhere ----------------------------------------------


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[], Any]], Any]]:
    """``held(start)``: runs ``start`` in a thread whose task body blocks until the test
    ends, once the body has started (its key is then in progress)."""
    started, release = threading.Event(), threading.Event()
    original = djtasks.effect
    threads: list[threading.Thread] = []

    def blocking(label: str, seconds: float) -> dict[str, Any]:
        started.set()
        assert release.wait(30)
        return original(label, seconds)

    monkeypatch.setattr(djtasks, "effect", blocking)

    def hold(start: Callable[[], Any]) -> None:
        thread = threading.Thread(target=start)
        thread.start()
        threads.append(thread)
        assert started.wait(10)
        monkeypatch.setattr(djtasks, "effect", original)  # later runs do not block

    with override_settings(IDEMPOTENCY={**using(CACHE_STORE), "MODE": "lease"}):
        yield hold
        release.set()
        for thread in threads:
            thread.join(10)


def test_a_run_in_progress_elsewhere_is_deferred_where_the_backend_can(
    dummy: Any, held: Any, execution_log: Path
) -> None:
    label = unique("defer")
    first = djtasks.on_dummy.enqueue(label)
    duplicate = djtasks.on_dummy.using(priority=7).enqueue(label)
    held(lambda: run_result(first))

    with pytest.raises(TaskDeferred) as deferred:
        run_result(duplicate)

    copy = dummy.results[-1]
    assert deferred.value.deferred_id == copy.id
    assert isinstance(deferred.value, CallInProgress)
    assert copy.task.run_after is not None and copy.args == [label]
    # the copy is the task as this run was enqueued (its priority), not the module's
    assert copy.task.priority == 7 and copy.task.backend == "dummy"
    assert DEFERRED_KEY not in copy.kwargs  # a business key is built again from the arguments


def test_a_deferred_copy_of_a_result_id_key_carries_the_key(
    dummy: Any, held: Any, execution_log: Path
) -> None:
    label = unique("carry")
    first = djtasks.on_dummy_by_result_id.enqueue(label)
    held(lambda: run_result(first))

    # the same result delivered again while its first delivery runs
    with pytest.raises(TaskDeferred):
        run_result(first)
    copy = dummy.results[-1]
    assert copy.id != first.id and copy.kwargs == {DEFERRED_KEY: first.id}


def test_a_deferred_copy_answers_from_the_record_of_its_key(
    dummy: Any, execution_log: Path
) -> None:
    label = unique("answer")
    with override_settings(IDEMPOTENCY={**using(CACHE_STORE), "MODE": "lease"}):
        first = djtasks.on_dummy_by_result_id.enqueue(label)
        answer = run_result(first)
        copy = djtasks.on_dummy_by_result_id.enqueue(label, **{DEFERRED_KEY: first.id})
        assert run_result(copy) == answer
    assert effects(label) == 1


def test_a_run_in_progress_elsewhere_fails_where_the_backend_cannot_defer(
    held: Any, execution_log: Path
) -> None:
    label = unique("nodefer")
    held(lambda: djtasks.on_immediate.enqueue(label))

    result = djtasks.on_immediate.enqueue(label)
    assert result.status == TaskResultStatus.FAILED
    # CallInProgress itself, not TaskDeferred: nothing was enqueued again
    assert [e.exception_class_path for e in result.errors] == [
        "idempotency.exceptions.CallInProgress"
    ]


def test_an_unreachable_store_defers_the_run_where_the_backend_can(
    dummy: Any, execution_log: Path
) -> None:
    label = unique("down")
    result = djtasks.on_dummy.enqueue(label)
    with dead_redis_store(), pytest.raises(TaskDeferred) as deferred:
        run_result(result)
    assert isinstance(deferred.value.__cause__, StoreUnavailable)
    assert dummy.results[-1].id == deferred.value.deferred_id
    assert runs(execution_log, label) == 0


def test_an_unreachable_store_fails_the_run_where_the_backend_cannot_defer(
    execution_log: Path,
) -> None:
    label = unique("down")
    with dead_redis_store():
        result = djtasks.on_immediate.enqueue(label)
    assert [e.exception_class_path for e in result.errors] == [
        "idempotency.exceptions.StoreUnavailable"
    ]
    assert runs(execution_log, label) == 0


def test_an_optional_key_with_a_missing_part_runs_without_idempotency(
    dummy: Any, execution_log: Path
) -> None:
    result = djtasks.optional_key.enqueue(None)
    run_result(result)
    run_result(result)
    assert runs(execution_log, "optional") == 2
    with pytest.raises(KeyPartMissing):
        run_result(djtasks.on_dummy.enqueue(None))


# -- misuse ------------------------------------------------------------------------------


def test_idempotent_function_over_a_task_names_idempotent_django_task() -> None:
    with pytest.raises(TypeError, match="idempotent_django_task"):
        idempotent_function(key="k:{label}")(djtasks.by_label)  # type: ignore[arg-type]  # the misuse


def test_celery_idempotent_task_over_a_django_task_names_idempotent_django_task() -> None:
    from idempotency.contrib.celery import idempotent_task

    with pytest.raises(ImproperlyApplied, match="idempotent_django_task"):
        idempotent_task(djtasks.by_label)  # type: ignore[arg-type]  # the misuse


@pytest.mark.parametrize("key", [None, "k:{label}"], ids=["result-id", "business-key"])
def test_a_task_without_its_context_is_refused(key: str | None) -> None:
    def no_context(label: str) -> None: ...

    with pytest.raises(ImproperlyApplied, match=r"takes_context=True.*queue, priority"):
        idempotent_django_task(key=key)(no_context)


def test_a_task_without_takes_context_cannot_key_on_its_result_id() -> None:
    with pytest.raises(ImproperlyApplied, match=r"takes_context=True"):
        djtasks.context_without_takes_context.call("x")


def test_applied_twice_is_refused() -> None:
    with pytest.raises(ImproperlyApplied, match="twice"):
        idempotent_django_task(key="x:{label}")(djtasks.by_label)


def test_async_tasks_cannot_run_in_atomic_mode() -> None:
    async def body(context: Any, label: str) -> None: ...

    with pytest.raises(ImproperlyApplied, match="mode='lease'"):
        idempotent_django_task(key="a:{label}", mode="atomic")(body)
