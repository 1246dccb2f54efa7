"""One setting's description (idempotency.conf.setting): which values each kind accepts,
and how the reference and the checks name them."""

from __future__ import annotations

from typing import Any

import pytest

from idempotency.conf import Setting


@pytest.mark.parametrize(
    ("setting", "good", "bad"),
    [
        (Setting(True, "", "bool"), [True, False], [1, 0, "yes", None]),
        (Setting(1, "", "seconds"), [0.5, 3, 86400], [0, -1, True, "5", float("inf"), None]),
        (Setting(0, "", "seconds", inclusive=True), [0, 0.0, 2], [-0.1, float("nan")]),
        (Setting(1, "", "integer"), [1, 500], [1.5, 0, False]),
        (Setting("a", "", "choice", choices=("a", "b")), ["a", "b"], ["c", None, 1]),
        (Setting("x.y", "", "path"), ["x.y", len], [1, None]),
        (Setting("H", "", "header"), ["Idempotency-Key"], ["bad header", "", 3]),
        (Setting([], "", "headers"), [[], ["A", "B"], ("A",)], ["A", [1]]),
        (Setting(None, "", "cache", nullable=True), [None, "default"], [1]),
    ],
)
def test_each_kind_accepts_its_values_and_refuses_others(
    setting: Setting, good: list[Any], bad: list[Any]
) -> None:
    assert [v for v in good if not setting.accepts(v)] == []
    assert [v for v in bad if setting.accepts(v)] == []


def test_labels_and_expectations_name_the_type_and_bounds() -> None:
    assert Setting(None, "", "seconds", nullable=True).label == "seconds or None"
    assert Setting([], "", "aliases").label == "list of str"
    assert Setting(0, "", "integer", inclusive=True).expected == "an integer >= 0"
    assert Setting(1, "", "seconds").expected == "a number > 0"
    choice = Setting("a", "", "choice", choices=("a", "b"), nullable=True)
    assert choice.expected == "None or one of 'a', 'b'"


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown setting kind 'float'"):
        Setting(1.0, "", "float")
