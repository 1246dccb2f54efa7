"""``idempotency/models.py``: the tables behind the database store and the database token
backend. The database itself decides who owns a key (a unique ``(scope, key)``), a row
written by code that predates the record authenticator gets a blank one, and the
migrations say what the models say."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from idempotency.models import IdempotencyRecord, RecordQuota, RecordState, SubmitToken
from tests.support.counting import unique
from tests.support.records import record

pytestmark = pytest.mark.django_db


def test_the_migrations_say_what_the_models_say() -> None:
    out = StringIO()
    call_command("makemigrations", "idempotency", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_one_record_per_scope_and_key_whoever_inserts_it() -> None:
    key = unique("key")
    record(key=key, scope="a").save()
    record(key=key, scope="b").save()  # the same key in another scope is another record
    with pytest.raises(IntegrityError), transaction.atomic():
        record(key=key, scope="a").save()
    assert IdempotencyRecord.objects.filter(key=key).count() == 2


def test_a_row_inserted_without_an_authenticator_gets_a_blank_one() -> None:
    """Raw SQL (or a process older than the column) names no ``mac``: the table fills it."""
    row = record(key=unique("raw"))
    fields = [
        each for each in IdempotencyRecord._meta.concrete_fields if each.name not in {"id", "mac"}
    ]
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(IdempotencyRecord._meta.db_table)} "
            f"({', '.join(quote(field.column) for field in fields)}) "
            f"VALUES ({', '.join(['%s'] * len(fields))})",
            [field.get_db_prep_save(getattr(row, field.attname), connection) for field in fields],
        )
    stored = IdempotencyRecord.objects.get(key=row.key)
    assert stored.mac == ""
    assert stored.is_completed and stored.response_body == row.response_body


def test_a_record_says_whether_it_is_completed_and_names_itself() -> None:
    claimed = record(key="k1", scope="auth.user:1", state=RecordState.IN_PROGRESS)
    assert not claimed.is_completed
    assert str(claimed) == "auth.user:1 / k1 (in_progress)"
    done = record(key="k2", scope="auth.user:1")
    assert done.is_completed
    assert str(done) == "auth.user:1 / k2 (completed)"


def test_the_stored_bodies_have_a_permission_of_their_own() -> None:
    assert Permission.objects.filter(
        content_type__app_label="idempotency", codename="view_idempotencyrecord_body"
    ).exists()


def test_a_submit_tokens_hash_is_unique_and_its_name_says_whether_it_was_used() -> None:
    now = timezone.now()
    values = {
        "token_hash": "0" * 64,
        "scope": "auth.user:1",
        "purpose": "checkout",
        "created_at": now,
        "expires_at": now + timedelta(minutes=5),
    }
    token = SubmitToken.objects.create(**values)
    assert str(token) == "auth.user:1 / checkout (open)"
    token.consumed_at = now
    assert str(token) == "auth.user:1 / checkout (consumed)"
    with pytest.raises(IntegrityError), transaction.atomic():
        SubmitToken.objects.create(**{**values, "scope": "auth.user:2"})


def test_one_quota_row_per_scope_and_window() -> None:
    expires = timezone.now() + timedelta(minutes=1)
    quota = RecordQuota.objects.create(scope="s", window=60, count=3, expires_at=expires)
    assert str(quota) == "s @ 60: 3"
    RecordQuota.objects.create(scope="s", window=120, expires_at=expires)
    with pytest.raises(IntegrityError), transaction.atomic():
        RecordQuota.objects.create(scope="s", window=60, expires_at=expires)
