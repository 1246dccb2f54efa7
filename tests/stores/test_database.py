"""Atomic mode's held savepoint releases (``idempotency.stores.database``), on the wire
and in the data: a release rides with the statement after it, and every nesting of
``atomic()`` blocks (committed, rolled back, caught errors) leaves exactly the rows it
leaves without the layer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idempotency.stores.database import ReleaseBatch, batched_releases
from tests.support.wire import sent_queries
from tests.testapp.models import Effect

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


class Boom(Exception):
    """A block's own failure, raised to roll it back to its savepoint."""


def releases(sent: list[str]) -> list[str]:
    return [q for q in sent if "RELEASE SAVEPOINT" in q]


def labels() -> list[str]:
    return sorted(Effect.objects.values_list("label", flat=True))


def test_a_release_rides_with_the_next_statement() -> None:
    with sent_queries(connection) as sent, transaction.atomic(), batched_releases(["default"]):
        with transaction.atomic():
            Effect.objects.create(label="inner")
        Effect.objects.create(label="after")
    ridden = [q for q in sent if q.startswith("RELEASE SAVEPOINT")]
    assert len(ridden) == 1, sent
    assert 'INSERT INTO "testapp_effect"' in ridden[0]
    assert ridden[0].index("RELEASE") < ridden[0].index("INSERT")
    assert labels() == ["after", "inner"]


def test_one_round_trip_fewer_than_without_it() -> None:
    def run(batched: bool) -> list[str]:
        with sent_queries(connection) as sent:
            held = batched_releases(["default"]) if batched else nullcontext()
            with transaction.atomic(), held:
                with transaction.atomic():
                    Effect.objects.create(label="x")
                Effect.objects.create(label="y")
        return sent

    plain, batched = run(False), run(True)
    assert len(batched) == len(plain) - 1, (plain, batched)
    assert len(releases(batched)) == len(releases(plain)) == 1


def test_a_release_still_held_at_the_commit_is_never_sent() -> None:
    with (
        sent_queries(connection) as sent,
        transaction.atomic(),
        batched_releases(["default"]),
        transaction.atomic(),
    ):
        Effect.objects.create(label="only")
    assert releases(sent) == []
    assert labels() == ["only"]


def test_sibling_blocks_release_the_first_with_the_second_savepoint() -> None:
    with sent_queries(connection) as sent, transaction.atomic(), batched_releases(["default"]):
        with transaction.atomic():
            Effect.objects.create(label="one")
        with transaction.atomic():
            Effect.objects.create(label="two")
        Effect.objects.create(label="three")
    joined = [q for q in sent if q.startswith("RELEASE SAVEPOINT") and "; SAVEPOINT" in q]
    assert len(joined) == 1, sent
    assert labels() == ["one", "three", "two"]


def test_a_rolled_back_enclosing_block_drops_the_release_it_holds() -> None:
    with sent_queries(connection) as sent, transaction.atomic(), batched_releases(["default"]):
        Effect.objects.create(label="kept")
        with pytest.raises(Boom), transaction.atomic():
            with transaction.atomic():
                Effect.objects.create(label="inner")
            raise Boom
        Effect.objects.create(label="after")
    assert labels() == ["after", "kept"]
    (rollback,) = [q for q in sent if q.startswith("ROLLBACK TO SAVEPOINT")]
    rolled_back = rollback.split()[-1]
    # the inner block's release was dropped with the rollback; Django's release of the
    # rolled-back savepoint itself rode with the next statement
    (release,) = releases(sent)
    assert release.startswith(f"RELEASE SAVEPOINT {rolled_back}; INSERT")


def test_a_caught_integrity_error_rolls_back_to_its_savepoint() -> None:
    Effect.objects.create(id=1, label="existing")
    with transaction.atomic(), batched_releases(["default"]):
        with transaction.atomic():
            Effect.objects.create(label="before")
        with pytest.raises(IntegrityError), transaction.atomic():
            Effect.objects.create(id=1, label="duplicate")
        Effect.objects.create(label="after")
    assert labels() == ["after", "before", "existing"]


def test_server_side_binding_sends_the_release_on_its_own() -> None:
    saved = connection.settings_dict["OPTIONS"]
    connection.close()
    connection.settings_dict["OPTIONS"] = {**saved, "server_side_binding": True}
    try:
        with sent_queries(connection) as sent, transaction.atomic(), batched_releases(["default"]):
            with transaction.atomic():
                Effect.objects.create(label="inner")
            Effect.objects.create(label="after")
        assert sum(q.startswith("RELEASE SAVEPOINT") for q in sent) == 1
        assert all(";" not in q for q in sent), sent  # one statement per message
        assert labels() == ["after", "inner"]
    finally:
        connection.close()
        connection.settings_dict["OPTIONS"] = saved


def test_the_wrapper_leaves_with_the_block() -> None:
    before = list(connection.execute_wrappers)
    with transaction.atomic(), batched_releases(["default"]):
        assert any(isinstance(w, ReleaseBatch) for w in connection.execute_wrappers)
    with pytest.raises(Boom), transaction.atomic(), batched_releases(["default"]):
        raise Boom
    assert connection.execute_wrappers == before


# Programs of nested blocks: ("insert", label), ("block", steps, fails) and ("catch",
# label) (an insert that breaks the unique id, caught around its own atomic()).
Step = tuple[Any, ...]
steps: st.SearchStrategy[list[Step]] = st.recursive(
    st.lists(
        st.one_of(
            st.tuples(st.just("insert"), st.sampled_from("abcdef")),
            st.tuples(st.just("catch"), st.sampled_from("uvw")),
        ),
        max_size=3,
    ),
    lambda inner: st.lists(
        st.one_of(
            st.tuples(st.just("insert"), st.sampled_from("abcdef")),
            st.tuples(st.just("block"), inner, st.booleans()),
        ),
        max_size=4,
    ),
    max_leaves=8,
)


def run(program: list[Step], path: str = "") -> None:
    for i, step in enumerate(program):
        where = f"{path}{i}"
        if step[0] == "insert":
            Effect.objects.create(label=f"{step[1]}{where}")
        elif step[0] == "catch":
            try:
                with transaction.atomic():
                    Effect.objects.create(id=1, label=f"{step[1]}{where}")
            except IntegrityError:
                pass
        else:
            try:
                with transaction.atomic():
                    run(step[1], f"{where}.")
                    if step[2]:
                        raise Boom
            except Boom:
                pass


def outcome(program: list[Step], *, batched: bool) -> list[str]:
    Effect.objects.all().delete()
    Effect.objects.create(id=1, label="taken")
    held = batched_releases(["default"]) if batched else nullcontext()
    with transaction.atomic(), held:
        run(program)
        Effect.objects.create(label="last")
    return labels()


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=steps)
def test_every_nesting_leaves_the_rows_it_leaves_without_it(program: list[Step]) -> None:
    assert outcome(program, batched=True) == outcome(program, batched=False)


@pytest.fixture(autouse=True)
def _ids_above_one() -> Iterator[None]:
    """Rows the programs insert get ids well above the one the "catch" steps collide on."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('testapp_effect', 'id'), 1000)")
    yield


@pytest.mark.parametrize("batched", [False, True])
def test_a_rollback_to_a_savepoint_released_out_of_order_fails_as_without_it(
    batched: bool,
) -> None:
    """``savepoint_commit`` of an older savepoint releases the newer one too: rolling back
    to the newer one then fails, held release or not."""
    from django.db import DatabaseError

    held = batched_releases(["default"]) if batched else nullcontext()
    with pytest.raises(DatabaseError, match="does not exist"), transaction.atomic(), held:
        older = transaction.savepoint()
        Effect.objects.create(label="a")
        newer = transaction.savepoint()
        Effect.objects.create(label="b")
        transaction.savepoint_commit(older)
        transaction.savepoint_rollback(newer)
    assert labels() == []
