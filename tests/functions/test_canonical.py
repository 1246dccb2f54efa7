"""idempotency.functions.arguments: one place tells the types apart (kind_of); canonical data for
hashing; key template parts (equal values in any order give one text, a value with no
canonical text is refused by name)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from idempotency.functions.arguments import (
    NoCanonicalForm,
    arguments_digest,
    canonical,
    canonical_json,
    key_part,
    kind_of,
)


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Opaque:
    """No __str__, no __format__: str() is the repr, with a memory address."""


class Reprs:
    def __repr__(self) -> str:
        return "Reprs()"


class Named:
    def __str__(self) -> str:
        return "named"


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, "none"),
        (True, "bool"),
        (1, "int"),
        (Level.HIGH, "enum"),
        (Colour.RED, "enum"),
        ("a", "str"),
        (1.5, "float"),
        (decimal.Decimal("1.0"), "decimal"),
        (datetime.datetime(2024, 1, 2, 3, 4), "datetime"),
        (datetime.date(2024, 1, 2), "date"),
        (datetime.time(3, 4), "time"),
        (datetime.timedelta(seconds=3), "timedelta"),
        (uuid.UUID(int=7), "uuid"),
        (b"x", "bytes"),
        ([1], "list"),
        ((1,), "tuple"),
        ({"a": 1}, "dict"),
        (set(), "set"),
        (frozenset(), "frozenset"),
        (Point(1, 2), "dataclass"),
        (Opaque(), "unknown"),
    ],
)
def test_kind_of(value: Any, kind: str) -> None:
    assert kind_of(value) == kind


def test_canonical_keeps_its_form() -> None:
    """The form fingerprints were hashed in before this module existed: unchanged."""
    value = {
        "b": [decimal.Decimal("10.00"), 1.5, {2, 1}],
        "a": (Colour.RED, Level.HIGH, datetime.date(2024, 1, 2), b"\x01", Point(1, 2)),
    }
    assert canonical_json(canonical(value)) == (
        f'{{"$map":[["a",[{{"$enum":"{__name__}.Colour","value":"red"}},3,'
        f'{{"$date":"2024-01-02"}},{{"$bytes":"01"}},{{"$dataclass":"{__name__}.Point",'
        '"fields":{"$map":[["x",1],["y",2]]}}]],["b",[{"$decimal":"1E+1"},'
        '{"$float":"1.5"},{"$set":[1,2]}]]]}'
    )
    with pytest.raises(TypeError, match="cannot hash a Opaque"):
        canonical([Opaque()])


keys = st.text(max_size=6)
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=8)
    | st.decimals(allow_nan=False, allow_infinity=False)
)
values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(keys, children, max_size=4)
        | st.frozensets(st.integers() | st.text(max_size=4), max_size=4)
    ),
    max_leaves=16,
)


def reordered(value: Any, order: Any) -> Any:
    """An equal value whose dicts list their keys in another order (drawn by ``order``)."""
    if isinstance(value, dict):
        items = [(k, reordered(v, order)) for k, v in value.items()]
        return dict(order.draw(st.permutations(items)))
    if isinstance(value, list):
        return [reordered(item, order) for item in value]
    return value


@given(values, st.data())
def test_equal_values_in_any_order_give_one_key_part_and_one_digest(value: Any, order: Any) -> None:
    other = reordered(value, order)
    assert other == value
    assert key_part(other, "payload") == key_part(value, "payload")
    assert arguments_digest(other) == arguments_digest(value)


@given(st.dictionaries(keys, st.integers(), min_size=2, max_size=6), st.data())
def test_a_dict_part_is_one_text_whatever_its_order(payload: dict[str, int], order: Any) -> None:
    shuffled = dict(order.draw(st.permutations(list(payload.items()))))
    assert key_part(shuffled, "payload") == key_part(payload, "payload")
    assert isinstance(key_part(payload, "payload"), str)


def test_scalars_are_formatted_by_str_format_as_before() -> None:
    for value in (1, "a", 1.5, decimal.Decimal("10.00"), uuid.UUID(int=1), Colour.RED, b"x"):
        assert key_part(value, "part") is value
    assert format(key_part(Named(), "part")) == "named"  # a __str__ of its own is its text


@pytest.mark.parametrize("value", [Opaque(), Reprs(), [Opaque()], {"a": Reprs()}])
def test_a_part_with_no_canonical_text_is_refused_by_name(value: Any) -> None:
    with pytest.raises(NoCanonicalForm, match=r"key part \{payload\} is a") as raised:
        key_part(value, "payload")
    assert isinstance(raised.value, TypeError)
    assert "0x" not in str(raised.value)  # never a repr with an address
