"""reencrypt_records() (``idempotency.stores.reencryption``): every live completed body
rewritten under the newest key of ``BODY_ENCRYPTION_KEYS`` with its tag made anew, on the
stores that can list their records; HTTP end to end is in tests/test_codecs.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.test import override_settings

from idempotency.codecs import FernetCodec
from idempotency.stores.base import BaseStore, ClaimStatus, StoredResponse
from idempotency.stores.cache import CacheStore
from idempotency.stores.database import DatabaseStore
from idempotency.stores.redis import RedisStore
from idempotency.stores.reencryption import reencrypt_records
from tests.support import store_writer

pytestmark = pytest.mark.django_db(transaction=True)

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()
SCOPE = "user:1"


def encrypted_under(*names: str) -> Any:
    return override_settings(
        IDEMPOTENCY={
            "BODY_CODEC": "idempotency.codecs.FernetCodec",
            "BODY_ENCRYPTION_KEYS": list(names),
        }
    )


@pytest.fixture(
    params=[
        pytest.param("database", id="database"),
        pytest.param("redis", id="redis", marks=pytest.mark.redis),
    ]
)
def store(request: pytest.FixtureRequest) -> Iterator[BaseStore]:
    yield DatabaseStore() if request.param == "database" else RedisStore()


def completed_under(store: BaseStore, body: bytes) -> str:
    key = str(uuid.uuid4())
    claim = store.claim(SCOPE, key, fingerprint="fp", lease=30, ttl=600)
    assert claim.owned
    stored = StoredResponse(201, [("Content-Type", "application/json")], body)
    assert store.complete(SCOPE, key, fence=claim.fence, response=stored, ttl=600)
    return key


def replayed_body(store: BaseStore, key: str) -> bytes:
    found = store.lookup(SCOPE, key, fingerprint="fp")
    assert found is not None and found.status is ClaimStatus.COMPLETED
    assert found.response is not None
    return found.response.body


def test_every_body_moves_to_the_newest_key_in_batches(store: BaseStore) -> None:
    with encrypted_under(OLD):
        written = {completed_under(store, b'{"n": %d}' % n): b'{"n": %d}' % n for n in range(3)}
    with encrypted_under(NEW, OLD):
        result = reencrypt_records(store=store, batch_size=2)
    assert result.reencrypted >= 3 and result.unreadable == result.forged == 0
    assert result.batches >= 2
    with encrypted_under(NEW):  # the old key removed: every body still reads, under the new one
        assert {key: replayed_body(store, key) for key in written} == written


def test_a_dry_run_counts_and_rewrites_nothing(store: BaseStore) -> None:
    with encrypted_under(OLD):
        key = completed_under(store, b"{}")
        before = store_writer.field(store, SCOPE, key, "body")
    with encrypted_under(NEW, OLD):
        assert reencrypt_records(store=store, dry_run=True).reencrypted >= 1
        assert store_writer.field(store, SCOPE, key, "body") == before


def test_a_body_in_clear_is_unreadable_unless_plaintext_is_asked_for(store: BaseStore) -> None:
    key = completed_under(store, b"in clear")  # before encryption was turned on
    with encrypted_under(NEW):
        assert reencrypt_records(store=store).unreadable >= 1
        assert store_writer.field(store, SCOPE, key, "body") == b"in clear"
        assert reencrypt_records(store=store, plaintext=True).reencrypted >= 1
        assert (
            FernetCodec([NEW]).decode(store_writer.field(store, SCOPE, key, "body")) == b"in clear"
        )
        assert replayed_body(store, key) == b"in clear"


def test_a_forged_record_is_never_signed_anew(store: BaseStore) -> None:
    with encrypted_under(OLD):
        key = completed_under(store, b"{}")
        planted = FernetCodec([OLD]).encode(b'{"pan": "4000000000000002"}')
        store_writer.change(store, SCOPE, key, body=planted)
    with encrypted_under(NEW, OLD):
        assert reencrypt_records(store=store).forged >= 1
        assert store_writer.field(store, SCOPE, key, "body") == planted


def test_refuses_a_codec_without_keys_a_store_it_cannot_list_and_a_bad_batch() -> None:
    with pytest.raises(ValueError, match="no keys to rotate"):
        reencrypt_records(store=DatabaseStore())
    with encrypted_under(NEW):
        with pytest.raises(ValueError, match="cannot list its records"):
            reencrypt_records(store=CacheStore())
        with pytest.raises(ValueError, match="positive integer"):
            reencrypt_records(store=DatabaseStore(), batch_size=0)
