"""The Idempotency-Key header: sf-string and bare forms, and everything refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from idempotency.exceptions import InvalidIdempotencyKey
from idempotency.http.keys import parse_key


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("abc", "abc"),
        ('"abc"', "abc"),
        ("  abc\t", "abc"),
        ('"a b;c"', "a b;c"),
        ('"with \\"quote\\" and \\\\"', 'with "quote" and \\'),
        ("8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ("x" * 255, "x" * 255),
    ],
)
def test_accepted_forms(raw: str, key: str) -> None:
    assert parse_key(raw) == key


def test_absent_header_is_no_key() -> None:
    assert parse_key(None) is None


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        '""',
        "x" * 256,
        '"' + "x" * 256 + '"',
        "a,b",  # a repeated header, as servers fold it
        '"a", "b"',
        '"abc"; p=1',
        '"unterminated',
        '"bad \\escape"',
        "caf\u00e9",
        "tab\tinside",
        'bare"quote',
        "new\nline",
    ],
)
def test_refused_forms(raw: str) -> None:
    with pytest.raises(InvalidIdempotencyKey):
        parse_key(raw)


@given(st.text(max_size=300))
def test_any_value_parses_or_is_refused_cleanly(raw: str) -> None:
    try:
        key = parse_key(raw)
    except InvalidIdempotencyKey:
        return
    assert key is not None
    assert 1 <= len(key) <= 255
    assert all(" " <= ch <= "~" for ch in key)
