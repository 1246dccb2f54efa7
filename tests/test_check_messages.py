"""The system checks' messages (``idempotency.check_messages``): one entry per id, each with
a hint, every id raised somewhere in the package, and ``message()`` making an Error of an
``E`` id and a Warning of a ``W`` one, its placeholders filled."""

from __future__ import annotations

import re
from pathlib import Path

from django.core import checks

from idempotency.check_messages import MESSAGES, cap, message

PACKAGE = Path(__file__).resolve().parent.parent / "idempotency"


def test_every_id_is_an_error_or_a_warning_with_a_message_and_a_hint() -> None:
    assert len(MESSAGES) > 30
    for code, entry in MESSAGES.items():
        assert re.fullmatch(r"[EW]\d{3}", code), code
        assert entry.msg.strip() and entry.hint.strip(), code


def test_every_id_is_raised_by_the_package() -> None:
    """An id no check raises is a retired one: it belongs in the retired list, not here."""
    source = "\n".join(
        path.read_text() for path in PACKAGE.rglob("*.py") if path.name != "check_messages.py"
    )
    unused = [code for code in MESSAGES if f'"{code}"' not in source]
    assert unused == []


def test_message_fills_the_text_and_the_hint_and_picks_the_level() -> None:
    error = message("E001", type="list")
    assert isinstance(error, checks.Error)
    assert error.id == "idempotency.E001"
    assert "list" in error.msg
    assert error.hint == MESSAGES["E001"].hint.format(type="list")
    warning_code = next(code for code in MESSAGES if code.startswith("W"))
    placeholders = re.findall(r"{(\w+)", MESSAGES[warning_code].msg + MESSAGES[warning_code].hint)
    warning = message(warning_code, **dict.fromkeys(placeholders, "x"))
    assert isinstance(warning, checks.Warning) and not isinstance(warning, checks.Error)
    assert warning.id == f"idempotency.{warning_code}"


def test_cap_upper_cases_the_first_letter_only() -> None:
    assert cap("redis store 'x'") == "Redis store 'x'"
    assert cap("") == ""
    assert cap("ÉTAT d'un store") == "ÉTAT d'un store"
