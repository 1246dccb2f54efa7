"""``manage.py reencrypt_idempotency_records``: stored bodies rewritten under the newest
key of ``BODY_ENCRYPTION_KEYS`` (clear ones too with ``--plaintext``), counted only with
``--dry-run``, one line saying what was done, and a store or codec it cannot work on
refused as a command error. (Rotation on every store, forged records:
tests/test_codecs.py.)"""

from __future__ import annotations

import re
from io import StringIO
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.test import override_settings

from idempotency.codecs import FernetCodec
from idempotency.models import IdempotencyRecord
from tests.support.records import record
from tests.support.stores import CACHE_STORE, DB_STORE, using

pytestmark = pytest.mark.django_db

KEY = Fernet.generate_key().decode()
BODY = b'{"id": 1, "status": "created"}'


def under_fernet(store: str = DB_STORE) -> Any:
    return override_settings(
        IDEMPOTENCY={
            **using(store),
            "BODY_CODEC": "idempotency.codecs.FernetCodec",
            "BODY_ENCRYPTION_KEYS": [KEY],
        }
    )


#: The command's line: verb, bodies, batches, seconds, unreadable, forged.
LINE = re.compile(
    r"^(Re-encrypted|Would re-encrypt) (\d+) idempotency record bodies in (\d+) batches "
    r"\(\d+\.\d\d s\); (\d+) unreadable and (\d+) forged left as they are\.$"
)


def said(output: str) -> tuple[str, int, int, int, int]:
    found = LINE.match(output)
    assert found, output
    verb, done, batches, unreadable, forged = found.groups()
    return verb, int(done), int(batches), int(unreadable), int(forged)


def reencrypt(*args: str) -> str:
    out = StringIO()
    call_command("reencrypt_idempotency_records", *args, stdout=out)
    return out.getvalue().strip()


def bodies() -> list[bytes]:
    return [
        bytes(body) for body in IdempotencyRecord.objects.values_list("response_body", flat=True)
    ]


@pytest.fixture
def clear_records() -> None:
    """Two records whose bodies were stored before encryption was on."""
    record(key="k1", body=BODY).save()
    record(key="k2", body=BODY).save()


@pytest.mark.usefixtures("clear_records")
def test_clear_bodies_are_encrypted_only_when_asked() -> None:
    with under_fernet():
        assert said(reencrypt()) == ("Re-encrypted", 0, 1, 2, 0)  # clear: unreadable, kept
        assert bodies() == [BODY, BODY]
        assert said(reencrypt("--plaintext", "--dry-run")) == ("Would re-encrypt", 2, 1, 0, 0)
        assert bodies() == [BODY, BODY]
        assert said(reencrypt("--plaintext", "--batch-size", "1")) == ("Re-encrypted", 2, 2, 0, 0)
    codec = FernetCodec([KEY])
    assert [codec.decode(body) for body in bodies()] == [BODY, BODY]
    assert BODY not in bodies()


@pytest.mark.usefixtures("clear_records")
def test_what_the_command_cannot_do_is_a_command_error() -> None:
    with pytest.raises(CommandError, match="has no keys to rotate"):
        reencrypt()  # no encryption configured
    with under_fernet(CACHE_STORE), pytest.raises(CommandError, match="cannot list its records"):
        reencrypt()
    with under_fernet(), pytest.raises(CommandError, match="'0' is not a positive integer"):
        reencrypt("--batch-size", "0")
    assert bodies() == [BODY, BODY]
