"""Read replicas behind a database router: the library reads only its own alias.

The router below sends every read to ``replica`` (a second PostgreSQL database, holding
empty or stale copies) and every write to ``default``, as primary/replica routers do.
``DatabaseStore``, submit tokens and idempotent functions must never read through it:
a read that went to the replica shows up as a wrong answer (a second execution when
the replica is empty, a stale body or a 422 when it holds an old copy).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from idempotency import idempotent_function
from idempotency.exceptions import SubmitTokenInvalid, SubmitTokenUsed
from idempotency.models import IdempotencyRecord, SubmitToken
from idempotency.tokens import consume_submit_token, issue_submit_token
from tests.scale.views import record_execution
from tests.support.stores import using
from tests.support.storms import Storm, run_threads
from tests.testapp.executions import executions
from tests.testapp.models import Effect

ROUTER = "tests.scale.test_replicas.PrimaryReplicaRouter"
DB = "idempotency.stores.database.DatabaseStore"

on_both = pytest.mark.django_db(transaction=True, databases=["default", "replica"])


class PrimaryReplicaRouter:
    """Reads from the replica, writes to the primary (both migrated)."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return "replica"

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return "default"

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return True


@pytest.fixture
def routed() -> Iterator[None]:
    with override_settings(DATABASE_ROUTERS=[ROUTER]):
        yield


def _w006() -> list[Any]:
    # databases=[]: no database asked, as before Django 6.0 (since then, naming none
    # asks every alias for its features; this test has no database)
    return [m for m in run_checks(databases=[]) if m.id == "idempotency.W008"]


# -- the check (any database) ------------------------------------------------------------


def test_w006_when_the_store_alias_is_a_read_replica(routed: None) -> None:
    with override_settings(IDEMPOTENCY=using(DB, database="replica")):
        [warning] = _w006()
    assert "'replica'" in warning.msg and "'default'" in warning.msg
    assert "idempotency.IdempotencyRecord" in warning.msg
    assert "the store 'default'" in warning.msg
    assert _w006() == []  # the store's database "default": the primary


def test_no_w006_without_routers_or_for_a_primary() -> None:
    with override_settings(IDEMPOTENCY=using(DB, database="replica")):
        assert _w006() == []  # no router: nothing says "replica" is read-only


def test_check_command_reports_w006(routed: None) -> None:
    with (
        override_settings(IDEMPOTENCY=using(DB, database="replica")),
        pytest.raises(SystemCheckError, match=r"idempotency\.W008"),
    ):
        call_command("check", "--fail-level", "WARNING", databases=[])


# -- PostgreSQL primary + replica ----------------------------------------------------------


@pytest.mark.postgres
@on_both
@pytest.mark.parametrize("mode", ["atomic", "lease"])
def test_storm_through_the_router_runs_each_key_once(
    routed: None, execution_log: Path, mode: str
) -> None:
    keys = [f"replica-{mode}-{uuid.uuid4()}" for _ in range(4)]
    url = "/charge/?db=1&sleep=0.05"
    with override_settings(IDEMPOTENCY={**using(DB), "MODE": mode}):
        storm = Storm(keys, duplicates=6, url=url).run()  # the replica is empty
        assert executions(execution_log) == dict.fromkeys(keys, 1), storm.statuses()
        assert set(storm.statuses()) <= {201, 409}, storm.statuses()
        assert Counter(Effect.objects.using("default").values_list("label", flat=True)) == (
            dict.fromkeys(keys, 1)
        )
        runs_before = executions(execution_log)
        first = {k: storm.successes(k)[0].body for k in keys}
        assert all(a.body == first[a.key] for a in storm.answers if a.status == 201)

        # now the replica holds stale copies of every record: another body, and a
        # record of the same key with another fingerprint
        for record in IdempotencyRecord.objects.using("default").filter(key__in=keys):
            record.response_body = b'{"stale": true}'
            record.save(using="replica")
        IdempotencyRecord.objects.using("replica").create(
            pk=10**9, scope="scale", key=keys[0] + "-x", fingerprint="stale", state="completed",
            status_code=299, response_body=b"stale", expires_at=record.expires_at,
            created_at=record.created_at,
        )  # fmt: skip
        late = Storm([*keys, keys[0] + "-x"], duplicates=2, url=url).run()
    ran = executions(execution_log)
    assert {k: ran[k] for k in keys} == runs_before  # no replayed key ran again
    assert ran[keys[0] + "-x"] == 1
    assert Effect.objects.using("default").filter(label=keys[0] + "-x").count() == 1
    for answer in late.answers:
        if answer.key in first:
            assert answer.status == 201 and answer.replayed, answer
            assert answer.body == first[answer.key]
        elif answer.status != 409:  # the new key's concurrent duplicate may see it running
            assert answer.status == 201, answer
            assert json.loads(answer.body)["key"] == keys[0] + "-x"  # ran, on the primary


@pytest.mark.postgres
@on_both
def test_submit_tokens_are_read_on_the_primary(routed: None) -> None:
    token = issue_submit_token(user_or_scope="user:7", purpose="checkout", ttl=60)
    row = SubmitToken.objects.using("default").get()
    row.save(using="replica")  # a stale copy: never consumed

    def consume(_index: int) -> str:
        try:
            consume_submit_token(token=token, user_or_scope="user:7", purpose="checkout")
            return "won"
        except SubmitTokenUsed:
            return "used"
        except SubmitTokenInvalid:
            return "invalid"

    outcomes = run_threads(10, consume)
    assert Counter(outcomes) == {"won": 1, "used": 9}
    SubmitToken.objects.using("replica").all().delete()  # now an empty replica
    with pytest.raises(SubmitTokenUsed):  # not "invalid": the tombstone on the primary
        consume_submit_token(token=token, user_or_scope="user:7", purpose="checkout")


@pytest.mark.postgres
@on_both
@pytest.mark.parametrize("mode", ["atomic", "lease"])
def test_idempotent_functions_read_their_results_on_the_primary(
    routed: None, execution_log: Path, mode: str
) -> None:
    @idempotent_function(key="refund:{order_id}", store="default", mode=mode)
    def refund(order_id: int) -> dict[str, Any]:
        record_execution(f"refund:{order_id}")
        Effect.objects.create(label=f"refund:{order_id}", amount=order_id)
        return {"refund": uuid.uuid4().hex}

    first = refund(7)
    assert refund(7) == first  # the replica is empty
    primary = IdempotencyRecord.objects.using("default").get()
    IdempotencyRecord.objects.using("replica").create(
        scope="functions", key="refund:7", fingerprint="stale", state="completed",
        status_code=200, response_body=b"{}", expires_at=primary.expires_at,
        created_at=primary.created_at,
    )  # fmt: skip
    assert refund(7) == first  # a stale copy there changes nothing
    assert executions(execution_log) == {"refund:7": 1}
    assert Effect.objects.using("default").count() == 1
