"""``manage.py reencrypt_idempotency_records``: a thin wrapper over
:func:`~idempotency.stores.reencryption.reencrypt_records` that passes its options on,
prints one summary line, and turns a refusal into a ``CommandError``."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from idempotency.management.commands import reencrypt_idempotency_records as command
from idempotency.stores.reencryption import ReencryptionResult


def reencrypt_command(*args: str) -> str:
    out = StringIO()
    call_command("reencrypt_idempotency_records", *args, stdout=out)
    return out.getvalue().strip()


@pytest.fixture
def reencryptions(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    seen: list[dict[str, object]] = []

    def reencrypt(**kwargs: object) -> ReencryptionResult:
        seen.append(kwargs)
        return ReencryptionResult(reencrypted=3, unreadable=1, forged=2, batches=2, seconds=0.25)

    monkeypatch.setattr(command, "reencrypt_records", reencrypt)
    return seen


def test_passes_its_options_on_and_prints_one_summary_line(
    reencryptions: list[dict[str, object]],
) -> None:
    assert reencrypt_command() == (
        "Re-encrypted 3 idempotency record bodies in 2 batches (0.25 s); 1 unreadable and "
        "2 forged left as they are."
    )
    assert reencrypt_command(
        "--dry-run", "--plaintext", "--store", "redis", "--batch-size", "5"
    ).startswith("Would re-encrypt 3")
    assert reencryptions == [
        {"store": None, "batch_size": None, "dry_run": False, "plaintext": False},
        {"store": "redis", "batch_size": 5, "dry_run": True, "plaintext": True},
    ]


@pytest.mark.parametrize("size", ["0", "x"])
def test_a_batch_size_must_be_a_positive_integer(
    reencryptions: list[dict[str, object]], size: str
) -> None:
    with pytest.raises(CommandError):
        reencrypt_command("--batch-size", size)
    assert reencryptions == []


@pytest.mark.django_db
def test_a_refusal_is_a_command_error() -> None:
    with pytest.raises(CommandError, match="no keys to rotate"):
        reencrypt_command()
