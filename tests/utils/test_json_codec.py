"""``idempotency.utils.json_codec``: the hot path's JSON writes and reads exactly what ``json``
does, and falls back to it where its C shortcut is not there or would differ."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idempotency.http import fingerprints
from idempotency.utils import json_codec

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)
ENCODERS = {
    "json.dumps": json.JSONEncoder(),
    "compact, sorted, unicode": json.JSONEncoder(
        sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ),
    "the fingerprint's": fingerprints._ENCODER,
}


@pytest.mark.parametrize("name", ENCODERS)
@given(value=json_values)
@settings(max_examples=150, deadline=None)
def test_an_encoder_writes_what_its_json_encoder_writes(name: str, value: Any) -> None:
    encoder = ENCODERS[name]
    assert json_codec.encoder_of(encoder) is not encoder.encode  # the C shortcut is used
    assert json_codec.encoder_of(encoder)(value) == encoder.encode(value)


@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_the_fingerprint_writes_numbers_by_their_exact_text(number: Decimal) -> None:
    assert fingerprints._canonical_json([number]) == fingerprints._ENCODER.encode([number])


@given(value=json_values, before=st.sampled_from(["", " ", "\n\t ", "\r\n"]))
@settings(max_examples=200, deadline=None)
def test_a_decoder_reads_what_json_reads(value: Any, before: str) -> None:
    text = before + json.dumps(value) + before
    assert json_codec.loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", " ", "{", '{"a": }', "[1] x", "1 2", "\ufeff[1]", "nul"])
def test_a_decoder_refuses_what_json_refuses(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        json_codec.loads(text)


def test_extra_data_is_reported_where_json_reports_it() -> None:
    with pytest.raises(json.JSONDecodeError) as ours:
        json_codec.loads("[1]  x")
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads("[1]  x")
    assert (ours.value.msg, ours.value.pos) == (theirs.value.msg, theirs.value.pos)


def test_without_a_usable_c_encoder_the_encoder_is_json_encoders_own(monkeypatch: Any) -> None:
    encoder = json.JSONEncoder(sort_keys=True)
    indented = json.JSONEncoder(indent=2)
    assert json_codec.encoder_of(indented) == indented.encode
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)  # another Python
    assert json_codec.encoder_of(encoder) == encoder.encode

    def another_signature(*args: Any) -> Any:
        raise TypeError("make_encoder() takes 10 arguments")

    monkeypatch.setattr(json.encoder, "c_make_encoder", another_signature)
    assert json_codec.encoder_of(encoder) == encoder.encode

    # one that writes otherwise than JSONEncoder (which builds it with a markers dict)
    def other_output(markers: Any, *args: Any) -> Any:
        return lambda value, level: ["[]" if markers is None else "{}"]

    monkeypatch.setattr(json.encoder, "c_make_encoder", other_output)
    assert json_codec.encoder_of(encoder) == encoder.encode
