"""The checks' messages (idempotency.checks.messages): every id well formed, with a hint."""

from __future__ import annotations

from idempotency.checks import MESSAGES


def test_every_message_has_a_hint_and_a_well_formed_id() -> None:
    for code, message in MESSAGES.items():
        assert code[0] in "EW" and code[1:].isdigit() and len(code) == 4
        assert message.msg and message.hint
