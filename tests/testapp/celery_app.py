"""Celery app of the worker tests: ``celery -A tests.testapp.celery_app worker``.

The worker runs with the test process's settings module and ``DATABASE_URL``
pointing at the test database, so both see the same idempotency records. Task
side effects and lifecycle events are counted in the broker's Redis database
(``CELERY_TEST_BROKER_URL``) under keys named after each test's unique label.

The lifecycle handlers are connected when a worker of this app starts (``worker_init``),
never at import: a test process that imports this module and runs other tasks in
process (``Task.apply``) writes nothing to any Redis (``tests/test_quick_tier.py``).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import django
from django.apps import apps

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
if not apps.ready:
    django.setup()

import redis  # noqa: E402
from celery import Celery  # noqa: E402
from celery.signals import task_postrun, task_retry, worker_init, worker_ready  # noqa: E402

from idempotency.contrib.celery import IdempotentTask, idempotent_task  # noqa: E402

BROKER_URL = os.environ.get("CELERY_TEST_BROKER_URL", "redis://127.0.0.1:6379/14")
QUEUE = os.environ.get("BEYOND_CELERY_QUEUE", "beyond")
#: Seconds before the Redis transport redelivers a message nobody acknowledged.
VISIBILITY_TIMEOUT = 3

app = Celery("beyond", set_as_current=False)
app.conf.update(
    broker_url=BROKER_URL,
    broker_connection_retry_on_startup=True,
    broker_transport_options={
        "visibility_timeout": VISIBILITY_TIMEOUT,
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    },
    # a result backend for the chord test (its tasks keep their results); every other
    # task ignores results
    result_backend=BROKER_URL,
    result_expires=600,
    task_ignore_result=True,
    task_default_queue=QUEUE,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    task_always_eager=False,
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=False,
    worker_redirect_stdouts=False,
    worker_enable_remote_control=False,
)

_client: Any = None


def counters() -> Any:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(BROKER_URL)
    return _client


def key(label: str, what: str) -> str:
    return f"beyond:{label}:{what}"


def _ready(**kwargs: Any) -> None:
    counters().set(f"beyond:ready:{os.getpid()}", "1", ex=120)


def _postrun(
    task_id: str | None = None, retval: Any = None, state: str | None = None, **kwargs: Any
) -> None:
    try:
        value = json.loads(json.dumps(retval))
    except (TypeError, ValueError):
        value = repr(retval)
    entry = json.dumps({"state": state, "retval": value, "pid": os.getpid()})
    counters().rpush(f"beyond:postrun:{task_id}", entry)
    counters().expire(f"beyond:postrun:{task_id}", 600)


def _retry(request: Any = None, **kwargs: Any) -> None:
    task_id = getattr(request, "id", None)
    counters().incr(f"beyond:retries:{task_id}")
    counters().expire(f"beyond:retries:{task_id}", 600)


@worker_init.connect
def _in_this_worker(sender: Any = None, **kwargs: Any) -> None:
    """A worker of this app is starting: count its lifecycle in the broker's database."""
    if getattr(sender, "app", None) is not app:
        return
    worker_ready.connect(_ready, weak=False)
    task_postrun.connect(_postrun, weak=False)
    task_retry.connect(_retry, weak=False)


def _incr(name: str) -> int:
    client = counters()
    value = int(client.incr(name))
    client.expire(name, 600)
    return value


def _effect(label: str) -> int:
    return _incr(key(label, "effects"))


@app.task(name="beyond.probe")
def probe() -> str:
    """No effect: queued behind other messages, its run shows they were all handled."""
    return "probe"


@app.task(base=IdempotentTask, name="beyond.record_effect")
def record_effect(label: str) -> dict[str, Any]:
    """Keyed by the task id (the default)."""
    _effect(label)
    return {"label": label, "pid": os.getpid()}


@idempotent_task(app=app, name="beyond.consume_message", key="msg_{message_id}_{consumer}")
def consume_message(message_id: str, consumer: str, label: str) -> dict[str, Any]:
    """Keyed by the message: any task id carrying this message id is a duplicate."""
    _effect(label)
    return {"message_id": message_id, "consumer": consumer}


@idempotent_task(
    app=app,
    name="beyond.strict_consumer",
    key="pay_{message_id}",
    autoretry_for=(Exception,),
    retry_kwargs={"countdown": 0.2},
    max_retries=3,
)
def strict_consumer(message_id: str, amount: str, label: str) -> dict[str, Any]:
    """Retries any failure, yet a redelivery with other arguments must not retry."""
    _effect(label)
    return {"message_id": message_id, "amount": amount}


@app.task(
    base=IdempotentTask,
    bind=True,
    name="beyond.slow_effect",
    idempotency_mode="lease",  # a killed worker's claim outlives it until its lease ends
    idempotency_lease=float(os.environ.get("BEYOND_SLOW_LEASE", "6")),
    acks_late=True,
    reject_on_worker_lost=True,
)
def slow_effect(self: IdempotentTask, label: str, seconds: float) -> dict[str, Any]:
    """The first delivery records its start and sleeps (to be killed); later ones do not."""
    client = counters()
    client.rpush(key(label, "started"), os.getpid())
    client.expire(key(label, "started"), 600)
    if client.set(key(label, "first"), "1", nx=True, ex=600):
        time.sleep(seconds)  # real time: a task's work, which a real worker and broker time
    _effect(label)
    return {"label": label, "pid": os.getpid()}


@idempotent_task(
    app=app,
    name="beyond.flaky_autoretry",
    autoretry_for=(RuntimeError,),
    retry_kwargs={"countdown": 0.2},
    retry_backoff=False,
    max_retries=5,
)
def flaky_autoretry(label: str, failures: int) -> dict[str, Any]:
    """Fails ``failures`` times, then succeeds: Celery's autoretry runs it again."""
    attempt = _incr(key(label, "attempts"))
    if attempt <= failures:
        raise RuntimeError(f"attempt {attempt} fails")
    _effect(label)
    return {"attempts": attempt}


@app.task(base=IdempotentTask, bind=True, name="beyond.flaky_manual", max_retries=5)
def flaky_manual(self: IdempotentTask, label: str, failures: int) -> dict[str, Any]:
    """Fails ``failures`` times through ``self.retry()``."""
    attempt = _incr(key(label, "attempts"))
    if attempt <= failures:
        raise self.retry(countdown=0.2)
    _effect(label)
    return {"attempts": attempt}


def _counted_sleep(label: str, seconds: float) -> dict[str, Any]:
    _incr(key(label, "executions"))  # counted when the body starts: no rollback undoes it
    time.sleep(seconds)  # real time: a task's work, which a real worker and broker time
    _effect(label)
    return {"label": label}


@app.task(
    base=IdempotentTask,
    name="beyond.counted_lease",
    idempotency_mode="lease",
    # renewed every 2 s: a renewal may run 4 s late before the lease runs out, as one in a
    # worker on a loaded CI machine can (this 3 s lease let it run 2 s late, the 1 s lease
    # of the long body's task 0.67 s; then a duplicate took the key over and ran it again)
    idempotency_lease=6.0,
)
def counted_lease(label: str, seconds: float) -> dict[str, Any]:
    """Keyed by the task id, lease mode: duplicates are deferred while it runs (a body
    longer than the lease lives on its keep-alive)."""
    return _counted_sleep(label, seconds)


@app.task(base=IdempotentTask, name="beyond.counted_atomic", idempotency_mode="atomic")
def counted_atomic(label: str, seconds: float) -> dict[str, Any]:
    """Keyed by the task id, atomic mode: duplicates wait on the record, then replay."""
    return _counted_sleep(label, seconds)


@app.task(
    base=IdempotentTask,
    bind=True,
    name="beyond.deferred_then_flaky",
    max_retries=1,
    idempotency_key="deferred_{label}",
    idempotency_mode="lease",  # a duplicate is deferred while another delivery holds the key
    idempotency_lease=float(os.environ.get("BEYOND_DEFER_LEASE", "3")),
)
def deferred_then_flaky(self: IdempotentTask, label: str) -> dict[str, Any]:
    """Records what each run of its body sees, fails once through ``self.retry()``."""
    client = counters()
    client.rpush(key(label, "retries_seen"), self.request.retries)
    client.rpush(key(label, "override_seen"), int(hasattr(self, "override_max_retries")))
    client.expire(key(label, "retries_seen"), 600)
    client.expire(key(label, "override_seen"), 600)
    attempt = _incr(key(label, "attempts"))
    if attempt == 1:
        raise self.retry(countdown=0.2)
    _effect(label)
    return {"attempts": attempt}


@app.task(base=IdempotentTask, name="beyond.chord_part", ignore_result=False)
def chord_part(label: str, number: int) -> int:
    """A chord header task: counts its effect, returns the square."""
    _effect(label)
    return number * number


@app.task(base=IdempotentTask, name="beyond.chord_sum", ignore_result=False)
def chord_sum(results: list[int], label: str) -> int:
    """The chord's body: records every run of it."""
    total = sum(results)
    counters().rpush(key(label, "sums"), total)
    counters().expire(key(label, "sums"), 600)
    return total
