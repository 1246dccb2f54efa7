"""IdempotentTask in-process (Celery's eager ``apply``), and the beat tasks.

The real worker process, redelivery and SIGKILL are in ``test_celery_worker.py``.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.utils import timezone

from idempotency.contrib.celery import (
    IdempotentTask,
    idempotent_task,
    purge_expired_records_task,
    purge_expired_submit_tokens_task,
)
from idempotency.exceptions import CallableMismatch, CallInProgress, ImproperlyApplied
from idempotency.functions.arguments import fingerprint_of
from idempotency.functions.results import RESULT_CONTENT_TYPE
from idempotency.models import IdempotencyRecord, SubmitToken
from idempotency.stores.base import StoredResponse, get_store
from tests.support.stores import CACHE_STORE, DB_STORE, using
from tests.support.tasks import inprocess_app

pytestmark = pytest.mark.django_db

app = inprocess_app("beyond-eager")

effects: dict[str, int] = {}


def effect(label: str) -> int:
    effects[label] = effects.get(label, 0) + 1
    return effects[label]


@app.task(base=IdempotentTask, name="eager.by_task_id")
def by_task_id(label: str) -> dict[str, Any]:
    return {"label": label, "run": effect(label)}


@idempotent_task(app=app, name="eager.by_message", key="msg_{message_id}_{consumer}")
def by_message(message_id: str, consumer: str = "billing") -> int:
    return effect(f"{message_id}:{consumer}")


@idempotent_task(app=app, name="eager.other_by_message", key="msg_{message_id}_{consumer}")
def other_by_message(message_id: str, consumer: str = "billing") -> int:
    raise AssertionError("must not run under by_message's key")


@idempotent_task(
    app=app,
    name="eager.flaky",
    key="flaky:{label}",
    autoretry_for=(ConnectionError,),
    retry_kwargs={"countdown": 0},
    max_retries=3,
)
def flaky(label: str, failures: int) -> dict[str, int]:
    attempt = effect(f"{label}:attempts")
    if attempt <= failures:
        raise ConnectionError("broker hiccup")
    return {"attempts": attempt, "done": effect(label)}


@app.task(
    base=IdempotentTask,
    bind=True,
    name="eager.manual_retry",
    max_retries=3,
    idempotency_key=lambda label: f"manual:{label}",
)
def manual_retry(self: IdempotentTask, label: str) -> int:
    if effect(f"{label}:attempts") < 2:
        raise self.retry(countdown=0)
    return effect(label)


@idempotent_task(app=app, name="eager.slow", key="slow:{label}", lease=30, mode="lease")
def slow(label: str) -> str:
    # a redelivery takes the key over while this run is still going (its lease ran out)
    store = get_store()
    fingerprint = slow.get_idempotency_fingerprint((label,), {})  # type: ignore[attr-defined]
    takeover = store.claim("tasks", f"slow:{label}", fingerprint=fingerprint, lease=30, ttl=60)
    assert not takeover.owned  # still ours...
    IdempotencyRecord.objects.filter(key=f"slow:{label}").update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    takeover = store.claim("tasks", f"slow:{label}", fingerprint=fingerprint, lease=30, ttl=60)
    assert takeover.owned  # ...until the lease ran out
    store.complete(
        "tasks",
        f"slow:{label}",
        fence=takeover.fence,
        # as the library stores a result: a record without its content type is refused
        response=StoredResponse(200, [("Content-Type", RESULT_CONTENT_TYPE)], b'"the new owner"'),
        ttl=60,
    )
    return "the stale owner"


@pytest.fixture(autouse=True)
def _database_store() -> Any:
    with override_settings(IDEMPOTENCY={**using(DB_STORE)}):
        yield


def test_same_task_id_runs_once_and_replays_the_result() -> None:
    task_id = str(uuid.uuid4())
    label = uuid.uuid4().hex
    first = by_task_id.apply((label,), task_id=task_id).get()
    second = by_task_id.apply((label,), task_id=task_id).get()
    assert first == second == {"label": label, "run": 1}
    assert effects[label] == 1
    record = IdempotencyRecord.objects.get(scope="tasks", key=task_id)
    assert record.is_completed and record.method == "TASK" and record.route == "eager.by_task_id"
    # another task id is another message
    assert by_task_id.apply((label,)).get() == {"label": label, "run": 2}


def test_message_key_from_the_arguments() -> None:
    message_id = uuid.uuid4().hex
    assert by_message.apply((message_id,)).get() == 1
    assert by_message.apply(kwargs={"message_id": message_id}).get() == 1  # new task id
    assert by_message.apply((message_id, "shipping")).get() == 1
    assert effects[f"{message_id}:billing"] == 1
    assert IdempotencyRecord.objects.filter(key=f"msg_{message_id}_billing").exists()
    # two tasks claiming one key is a mistake, not a duplicate
    with pytest.raises(CallableMismatch):
        other_by_message.apply((message_id,)).get()


def test_a_direct_call_is_idempotent_with_a_message_key_only() -> None:
    label = uuid.uuid4().hex
    assert by_task_id(label)["run"] == 1
    assert by_task_id(label)["run"] == 2  # no task id: nothing to deduplicate on
    message_id = uuid.uuid4().hex
    assert by_message(message_id) == by_message(message_id) == 1


def test_failure_releases_the_key_so_celery_retries_it() -> None:
    label = uuid.uuid4().hex
    assert flaky.apply((label, 2)).get() == {"attempts": 3, "done": 1}
    assert flaky.apply((label, 2)).get() == {"attempts": 3, "done": 1}  # stored
    assert effects[f"{label}:attempts"] == 3 and effects[label] == 1

    label = uuid.uuid4().hex
    assert manual_retry.apply((label,)).get() == 1
    assert manual_retry.apply((label,)).get() == 1
    assert effects[label] == 1


def test_failure_without_retry_releases_the_key() -> None:
    label = uuid.uuid4().hex
    with pytest.raises(ConnectionError):
        flaky.apply((label, 10)).get()  # exhausts max_retries
    assert not IdempotencyRecord.objects.filter(key=f"flaky:{label}").exists()
    assert flaky.apply((label, 0)).get()["done"] == 1


def test_in_progress_key_under_eager_execution_raises() -> None:
    message_id = uuid.uuid4().hex
    claim = get_store().claim(
        "tasks",
        f"msg_{message_id}_billing",
        fingerprint=fingerprint_of("task", "eager.by_message"),
        lease=60,
        ttl=60,
    )
    assert claim.owned
    with pytest.raises(CallInProgress):
        # throw=True (task_eager_propagates): the exception itself, not Celery's
        # pickle-safe copy of it
        by_message.apply((message_id,), throw=True)


def test_a_stale_owners_completion_is_fenced_off(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="idempotency")
    label = uuid.uuid4().hex
    assert slow.apply((label,)).get() == "the stale owner"
    assert "was refused" in caplog.text
    record = IdempotencyRecord.objects.get(key=f"slow:{label}")
    assert json.loads(bytes(record.response_body)) == "the new owner"
    assert slow.apply((label,)).get() == "the new owner"


def test_non_json_result_fails_and_releases() -> None:
    @idempotent_task(app=app, name="eager.bad_result", key="bad:{label}")
    def bad_result(label: str) -> object:
        return object()

    label = uuid.uuid4().hex
    with pytest.raises(TypeError, match="cannot be stored"):
        bad_result.apply((label,)).get()
    assert not IdempotencyRecord.objects.filter(key=f"bad:{label}").exists()


def test_options_and_misuse() -> None:
    @idempotent_task(app=app, name="eager.limited", time_limit=90)
    def limited() -> None: ...

    @idempotent_task(app=app, name="eager.leased", lease=5)
    def leased() -> None: ...

    assert limited.get_idempotency_lease() == 90.0  # type: ignore[attr-defined]
    assert leased.get_idempotency_lease() == 5.0  # type: ignore[attr-defined]
    assert isinstance(limited, IdempotentTask)
    assert limited.acks_late and limited.reject_on_worker_lost

    with pytest.raises(ImproperlyApplied):
        idempotent_task(app=app, base=object)
    with pytest.raises(ValueError, match="nope"):

        @idempotent_task(app=app, name="eager.typo", key="k:{nope}")
        def typo(label: str) -> None: ...

        typo.apply(("x",)).get()


def test_purge_beat_task_deletes_expired_records() -> None:
    past = timezone.now() - timedelta(days=2)
    for index in range(3):
        IdempotencyRecord.objects.create(
            scope="tasks",
            key=f"old-{index}",
            fingerprint="f",
            created_at=past,
            expires_at=past + timedelta(days=1),
            state="completed",
        )
    IdempotencyRecord.objects.create(
        scope="tasks",
        key="fresh",
        fingerprint="f",
        created_at=timezone.now(),
        expires_at=timezone.now() + timedelta(days=1),
    )
    assert purge_expired_records_task.name == "idempotency.purge_expired_records"
    assert purge_expired_records_task.apply().get() == 3
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["fresh"]


def test_purge_submit_tokens_beat_task() -> None:
    past = timezone.now() - timedelta(days=1)
    SubmitToken.objects.create(
        token_hash="a" * 64, scope="s", purpose="p", created_at=past, expires_at=past
    )
    assert purge_expired_submit_tokens_task.name == "idempotency.purge_expired_submit_tokens"
    assert purge_expired_submit_tokens_task.apply().get() == 1
    assert not SubmitToken.objects.exists()


@idempotent_task(app=app, name="eager.atomic_writer", key="atomic:{label}", mode="atomic")
def atomic_writer(label: str, fail: bool) -> int:
    from tests.testapp.models import Effect

    Effect.objects.create(label=label)
    if fail:
        raise RuntimeError("after the write")
    return Effect.objects.filter(label=label).count()


@idempotent_task(app=app, name="eager.lease_writer", key="lease:{label}", mode="lease")
def lease_writer(label: str, fail: bool) -> int:
    from tests.testapp.models import Effect

    Effect.objects.create(label=label)
    if fail:
        raise RuntimeError("after the write")
    return Effect.objects.filter(label=label).count()


class TestIdempotentTaskMode:
    """``idempotent_task(mode=...)`` is ``idempotent_function``'s ``mode``."""

    def test_mode_sets_the_task_option(self) -> None:
        assert atomic_writer.idempotency_mode == "atomic"
        assert lease_writer.idempotency_mode == "lease"

    def test_an_unknown_mode_is_refused(self) -> None:
        with pytest.raises(ValueError, match="mode must be one of"):
            idempotent_task(app=app, name="eager.bad_mode", mode="sometimes")

    @pytest.mark.django_db(transaction=True)
    @override_settings(IDEMPOTENCY={**using(DB_STORE)})
    def test_atomic_mode_rolls_the_tasks_writes_back_with_the_claim(self) -> None:
        from tests.testapp.models import Effect

        label = uuid.uuid4().hex
        with pytest.raises(RuntimeError):
            atomic_writer.apply((label, True), task_id=str(uuid.uuid4())).get()
        assert not Effect.objects.filter(label=label).exists()
        assert not IdempotencyRecord.objects.filter(key=f"atomic:{label}").exists()
        assert atomic_writer.apply((label, False)).get() == 1
        assert atomic_writer.apply((label, False)).get() == 1  # the stored result
        assert Effect.objects.filter(label=label).count() == 1

    @pytest.mark.django_db(transaction=True)
    @override_settings(IDEMPOTENCY={**using(DB_STORE)})
    def test_lease_mode_keeps_a_failed_runs_writes(self) -> None:
        from tests.testapp.models import Effect

        label = uuid.uuid4().hex
        with pytest.raises(RuntimeError):
            lease_writer.apply((label, True)).get()
        assert Effect.objects.filter(label=label).count() == 1  # no transaction around it

    @override_settings(IDEMPOTENCY=using(CACHE_STORE))
    def test_atomic_mode_needs_the_database_store(self) -> None:
        with pytest.raises(ImproperlyConfigured, match="cannot run atomic mode"):
            atomic_writer.apply((uuid.uuid4().hex, False)).get()


def test_a_task_record_stored_with_an_unkeyed_fingerprint_still_replays() -> None:
    """Issue 36, finding 5: a delivery enqueued before the upgrade, redelivered after it,
    finds its record (stored with the unkeyed argument hash) and does not run again."""
    from idempotency.functions.arguments import arguments_digest

    runs: list[str] = []

    @idempotent_task(app=app, name="keyed.settle", key="settle:{ref}")
    def settle(ref: str) -> str:
        runs.append(ref)
        return "now"

    ref = str(uuid.uuid4())
    legacy = fingerprint_of("task", "keyed.settle")[:32] + arguments_digest({"ref": ref}).hex()[:32]
    assert settle.get_idempotency_fingerprint((ref,), {}) != legacy
    with override_settings(IDEMPOTENCY={**using(DB_STORE)}):
        store = get_store()
        claim = store.claim("tasks", f"settle:{ref}", fingerprint=legacy, lease=30, ttl=60)
        done = StoredResponse(200, [("Content-Type", "application/json")], b'"before"')
        assert store.complete("tasks", f"settle:{ref}", fence=claim.fence, response=done, ttl=60)
        assert settle.apply((ref,)).get() == "before"
    assert runs == []
