"""Store outages beyond HTTP: idempotent functions, submit tokens, locks and tasks raise
StoreUnavailable (a view with a submit token answers 503), never run their body, and a
delivered task is retried later."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from idempotency.exceptions import StoreUnavailable
from tests.support.faults import assert_unavailable, dead_redis_store
from tests.support.stores import locks_using, tokens_using

pytestmark = pytest.mark.django_db(transaction=True)


def test_functions_tokens_and_locks_raise_store_unavailable(
    outages: list[dict[str, Any]],
) -> None:
    from idempotency import idempotent_function, issue_submit_token, lock

    runs: list[int] = []

    @idempotent_function(key="fn:{n}", store="default")
    def work(n: int) -> int:
        runs.append(n)
        return n

    with dead_redis_store(
        **tokens_using("redis", cache="private"), **locks_using("redis", cache="private")
    ):
        with pytest.raises(StoreUnavailable):
            work(1)
        with pytest.raises(StoreUnavailable):
            issue_submit_token(user_or_scope="user:1", purpose="form")
        with pytest.raises(StoreUnavailable), lock("nightly", timeout=5):
            pass
    assert runs == []
    assert {o["operation"] for o in outages} == {"claim", "issue", "try_acquire"}


def test_require_submit_token_answers_503(rf: Any) -> None:
    from django.http import HttpResponse

    from idempotency.tokens import require_submit_token

    @require_submit_token("form", scope=lambda request: "user:1")
    def view(request: Any) -> HttpResponse:
        return HttpResponse("ran")

    with dead_redis_store(**tokens_using("redis", cache="private")):
        response = view(rf.post("/", HTTP_X_SUBMIT_TOKEN="abc"))
    assert_unavailable(response)


def test_an_eager_task_raises_store_unavailable() -> None:
    from idempotency.contrib.celery import idempotent_task

    runs: list[str] = []

    @idempotent_task(key="t:{name}", store="default")
    def job(name: str) -> str:
        runs.append(name)
        return name

    with dead_redis_store(), pytest.raises(StoreUnavailable):
        job("a")  # called directly: no broker to retry through, the caller sees it
    assert runs == []


@pytest.mark.redis
def test_a_delivered_task_is_retried_later_when_the_store_is_unreachable() -> None:
    """A worker's delivery (not eager): the body does not run and Celery schedules a retry,
    published to the real test broker on a queue of this test's own."""
    from celery import Celery
    from celery.exceptions import Retry

    from idempotency.contrib.celery import IdempotentTask
    from tests.support.services import BROKER_URL, broker_redis

    broker_redis()  # skips (or fails, where services are required) without the broker
    app = Celery("outage-retry", broker=BROKER_URL, set_as_current=False)
    app.conf.update(task_always_eager=False, result_backend=None)
    queue = f"idem-outage-{uuid.uuid4().hex[:8]}"
    runs: list[str] = []

    @app.task(
        base=IdempotentTask,
        name="outage.job",
        idempotency_key="job:{name}",
        idempotency_store="default",
        queue=queue,
        max_retries=3,
    )
    def job(name: str) -> str:
        runs.append(name)
        return name

    task: Any = job
    task.push_request(
        id=str(uuid.uuid4()),
        args=["a"],
        kwargs={},
        retries=0,
        is_eager=False,
        called_directly=False,
    )
    try:
        with dead_redis_store(), pytest.raises(Retry) as retried:
            task("a")
    finally:
        task.pop_request()
        broker_redis().delete(queue)
    assert runs == []
    assert isinstance(retried.value.exc, StoreUnavailable)
    assert retried.value.when is not None and float(retried.value.when) >= 0.5
