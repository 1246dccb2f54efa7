"""Stored bodies through BODY_CODEC: encrypted at rest, key rotation, re-encryption
(issue 36, finding 6: bodies were stored in plain text in PostgreSQL and Redis)."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core import checks
from django.core.management import call_command
from django.test import Client, override_settings

from idempotency import idempotent_function
from idempotency.checks import check_settings
from idempotency.codecs import FernetCodec, IdentityCodec, UndecodableBody
from idempotency.models import IdempotencyRecord
from idempotency.stores.reencryption import reencrypt_records
from tests.support.at_rest import stored_anywhere
from tests.support.stores import STORE_VARIANTS, store_params
from tests.testapp.executions import executions

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls("tests.urls")]

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()
FERNET = "idempotency.codecs.FernetCodec"
PAN = "4111111111111111"


def pay(client: Client, key: str, url: str = "/t/data/echo/") -> Any:
    return client.post(
        url,
        data=json.dumps({"pan": PAN, "cvv": "737"}),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def encrypted(variant: str, *keys: str, **extra: Any) -> dict[str, Any]:
    return {
        **STORE_VARIANTS[variant],
        "BODY_CODEC": FERNET,
        "BODY_ENCRYPTION_KEYS": list(keys),
        **extra,
    }


# -- the codecs themselves -----------------------------------------------------------------


def test_identity_keeps_the_bytes() -> None:
    codec = IdentityCodec()
    assert codec.decode(codec.encode(b"\x00abc")) == b"\x00abc"


def test_fernet_round_trips_every_body_and_rotates() -> None:
    old, both = FernetCodec([OLD]), FernetCodec([NEW, OLD])
    for body in (b"", b"{}", bytes(range(256)) * 10):
        token = old.encode(body)
        assert body not in token or not body
        assert both.decode(token) == body
        rotated = both.rotate(token)
        assert FernetCodec([NEW]).decode(rotated) == body
        with pytest.raises(UndecodableBody):
            FernetCodec([NEW]).decode(token)
    assert old.is_encoded(old.encode(b"x")) and not old.is_encoded(b'{"pan": 1}')


def test_a_tampered_token_is_undecodable() -> None:
    codec = FernetCodec([OLD])
    token = bytearray(codec.encode(b'{"id": 1}'))
    token[30] = ord("A") if token[30] != ord("A") else ord("B")
    with pytest.raises(UndecodableBody):
        codec.decode(bytes(token))


# -- over HTTP, on every store --------------------------------------------------------------


def test_by_default_a_body_is_stored_as_it_is(store_variant: str, client_a: Client) -> None:
    """The finding as it was: the card number readable in the store (what BODY_CODEC
    changes; the identity codec stays the default)."""
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[store_variant]):
        assert pay(client_a, str(uuid.uuid4())).status_code == 201
        assert stored_anywhere(PAN.encode())


def test_an_encrypted_body_is_nowhere_in_clear_and_replays_byte_for_byte(
    store_variant: str, client_a: Client, execution_log: Path
) -> None:
    key = str(uuid.uuid4())
    with override_settings(IDEMPOTENCY=encrypted(store_variant, OLD)):
        first = pay(client_a, key)
        again = pay(client_a, key)
        third = pay(client_a, key)  # db-cached: from the response cache
        assert first.status_code == again.status_code == third.status_code == 201
        assert again.content == third.content == first.content
        assert PAN.encode() in first.content
        assert again["Idempotent-Replayed"] == "true"
        assert not stored_anywhere(PAN.encode())
        assert not stored_anywhere(b'"brand"')
    assert executions(execution_log)[key] == 1


def test_a_body_under_a_retired_key_is_unreadable_and_nothing_runs(
    store_variant: str, client_a: Client, execution_log: Path
) -> None:
    key = str(uuid.uuid4())
    with override_settings(IDEMPOTENCY=encrypted(store_variant, OLD)):
        assert pay(client_a, key).status_code == 201
    with override_settings(IDEMPOTENCY=encrypted(store_variant, NEW)):
        again = pay(client_a, key)
    assert again.status_code == 500
    assert again["Content-Type"] == "application/problem+json"
    assert json.loads(again.content)["code"] == "idempotency-record-unreadable"
    assert executions(execution_log)[key] == 1


def test_a_tampered_database_body_is_refused_as_forged(
    client_a: Client, execution_log: Path
) -> None:
    # a body encrypted under a key the application never had: the record's tag (issue
    # 43) refuses it before the codec is even asked
    key = str(uuid.uuid4())
    with override_settings(IDEMPOTENCY=encrypted("db-atomic", OLD)):
        assert pay(client_a, key).status_code == 201
        record = IdempotencyRecord.objects.get(key=key)
        forged = FernetCodec([Fernet.generate_key()]).encode(b'{"pan": "4000000000000002"}')
        IdempotencyRecord.objects.filter(pk=record.pk).update(response_body=forged)
        again = pay(client_a, key)
    assert json.loads(again.content)["code"] == "idempotency-record-forged"
    assert b"4000000000000002" not in again.content
    assert executions(execution_log)[key] == 1


@pytest.mark.parametrize("path", store_params("db", "redis", "cache"))
def test_function_results_are_encrypted_too(path: Any) -> None:
    @idempotent_function(key="card:{ref}", store=path)
    def tokenize(ref: str) -> dict[str, str]:
        return {"pan": PAN}

    with override_settings(IDEMPOTENCY={"BODY_CODEC": FERNET, "BODY_ENCRYPTION_KEYS": [OLD]}):
        assert tokenize(ref="a") == {"pan": PAN}
        assert tokenize(ref="a") == {"pan": PAN}
        assert not stored_anywhere(PAN.encode())


# -- rotation and re-encryption ---------------------------------------------------------------


@pytest.mark.parametrize("variant", ["db-cached", pytest.param("redis", marks=pytest.mark.redis)])
def test_reencryption_moves_every_body_to_the_newest_key(
    variant: str, client_a: Client, execution_log: Path
) -> None:
    keys = [str(uuid.uuid4()) for _ in range(5)]
    with override_settings(IDEMPOTENCY=encrypted(variant, OLD)):
        firsts = {key: pay(client_a, key).content for key in keys}
        pay(client_a, keys[0])  # db-cached: puts the old ciphertext in the response cache
    with override_settings(IDEMPOTENCY=encrypted(variant, NEW, OLD)):
        assert pay(client_a, keys[1]).content == firsts[keys[1]]  # both keys decrypt
        result = reencrypt_records(batch_size=2)
        assert result.reencrypted == 5 and result.unreadable == 0 and result.batches >= 3
    with override_settings(IDEMPOTENCY=encrypted(variant, NEW)):  # the old key removed
        for key in keys:
            again = pay(client_a, key)
            assert again.status_code == 201 and again.content == firsts[key]
        assert not stored_anywhere(PAN.encode())
    assert all(executions(execution_log)[key] == 1 for key in keys)


def test_the_command_encrypts_bodies_stored_in_clear(client_a: Client, execution_log: Path) -> None:
    key = str(uuid.uuid4())
    with override_settings(IDEMPOTENCY=STORE_VARIANTS["db-atomic"]):
        first = pay(client_a, key)
    with override_settings(IDEMPOTENCY=encrypted("db-atomic", OLD)):
        assert pay(client_a, key).status_code == 500  # in clear: not a token, unreadable
        out = io.StringIO()
        call_command("reencrypt_idempotency_records", "--plaintext", stdout=out)
        assert out.getvalue().startswith("Re-encrypted 1 idempotency record bodies")
        assert not stored_anywhere(PAN.encode())
        again = pay(client_a, key)
    assert again.status_code == 201 and again.content == first.content
    assert executions(execution_log)[key] == 1


@pytest.mark.parametrize("variant", ["db-atomic", pytest.param("redis", marks=pytest.mark.redis)])
def test_reencryption_never_signs_a_forged_record(
    variant: str, user: Any, client_a: Client, execution_log: Path
) -> None:
    """Issue 43: the command re-writes a body and its record's tag together, and only
    where the old tag verifies, so it cannot launder a planted body into a valid record."""
    from idempotency.scopes import principal_scope
    from idempotency.stores.base import get_store
    from tests.support import store_writer

    kept, planted = str(uuid.uuid4()), str(uuid.uuid4())
    with override_settings(IDEMPOTENCY=encrypted(variant, OLD)):
        firsts = {key: pay(client_a, key).content for key in (kept, planted)}
        store, scope = get_store(), str(principal_scope(user))
        forged = FernetCodec([OLD]).encode(b'{"pan": "4000000000000002"}')
        store_writer.change(store, scope, planted, body=forged)
    with override_settings(IDEMPOTENCY=encrypted(variant, NEW, OLD)):
        out = io.StringIO()
        call_command("reencrypt_idempotency_records", stdout=out)
        assert "1 forged left as they are" in out.getvalue()
        assert store_writer.field(store, scope, planted, "body") == forged  # untouched
    with override_settings(IDEMPOTENCY=encrypted(variant, NEW)):
        assert pay(client_a, kept).content == firsts[kept]  # re-signed under the new key
        again = pay(client_a, planted)
    assert json.loads(again.content)["code"] == "idempotency-record-forged"
    assert executions(execution_log)[planted] == 1


def test_the_command_refuses_a_codec_without_keys_and_a_cache_store() -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no keys to rotate"):
        call_command("reencrypt_idempotency_records")
    with (
        override_settings(IDEMPOTENCY={**encrypted("cache", OLD)}),
        pytest.raises(CommandError, match="cannot list its records"),
    ):
        call_command("reencrypt_idempotency_records")


# -- checks --------------------------------------------------------------------------------------


def test_a_fernet_codec_without_keys_is_e040() -> None:
    with override_settings(IDEMPOTENCY={"BODY_CODEC": FERNET}):
        ids = [m.id for m in check_settings() if m.level >= checks.ERROR]
    assert ids == ["idempotency.E040"]
    with override_settings(IDEMPOTENCY={"BODY_CODEC": FERNET, "BODY_ENCRYPTION_KEYS": [OLD]}):
        assert not [m for m in check_settings() if m.level >= checks.ERROR]


def test_check_messages_never_show_a_key() -> None:
    secret = "not-a-fernet-key-but-secret"
    with override_settings(IDEMPOTENCY={"BODY_CODEC": FERNET, "BODY_ENCRYPTION_KEYS": [secret]}):
        messages = check_settings()
    assert [m.id for m in messages if m.level >= checks.ERROR] == ["idempotency.E040"]
    with override_settings(IDEMPOTENCY={"BODY_ENCRYPTION_KEYS": secret}):
        wrong_type = check_settings()
    assert [m.id for m in wrong_type if m.level >= checks.ERROR] == ["idempotency.E004"]
    for message in [*messages, *wrong_type]:
        assert secret not in f"{message.msg} {message.hint}"
