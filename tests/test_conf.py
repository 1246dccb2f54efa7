"""The settings (idempotency.conf): each setting's description and the values it accepts,
every default valid by its own description, and the settings object that re-reads them."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings
from django.utils.module_loading import import_string

from idempotency.conf import (
    DEFAULTS,
    MODES,
    SETTINGS,
    Setting,
    idempotency_settings,
    on_reload,
)


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


def test_every_default_is_a_value_its_setting_accepts() -> None:
    assert [name for name, s in SETTINGS.items() if not s.accepts(s.default)] == []


def test_every_dotted_path_default_imports() -> None:
    paths = {name for name, s in SETTINGS.items() if s.kind == "path"}
    # a path setting that may be None (ON_REPLAY: no hook) defaults to None
    defaulted = {name for name in paths if DEFAULTS[name] is not None}
    assert {name for name in paths - defaulted if SETTINGS[name].nullable} == {"ON_REPLAY"}
    assert {name: callable(import_string(DEFAULTS[name])) for name in defaulted} == dict.fromkeys(
        defaulted, True
    )


def test_the_modes_are_the_mode_settings_choices() -> None:
    assert SETTINGS["MODE"].choices == MODES == ("auto", "atomic", "lease")
    assert DEFAULTS["MODE"] in MODES


def test_a_setting_reads_its_default_until_the_project_sets_it() -> None:
    assert DEFAULTS["TTL"] == idempotency_settings.TTL
    with override_settings(IDEMPOTENCY={"TTL": 7}):
        assert idempotency_settings.TTL == 7
    assert DEFAULTS["TTL"] == idempotency_settings.TTL


def test_an_unknown_or_private_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Invalid idempotency setting: 'TLL'"):
        _ = idempotency_settings.TLL
    with pytest.raises(AttributeError):
        _ = idempotency_settings._secret


def test_a_dotted_path_is_imported_once_until_the_settings_change() -> None:
    first = idempotency_settings.imported("SCOPE")
    assert first is idempotency_settings.imported("SCOPE")
    with override_settings(IDEMPOTENCY={"SCOPE": "idempotency.scopes.principal_of"}):
        from idempotency.scopes import principal_of

        assert idempotency_settings.imported("SCOPE") is principal_of
    assert idempotency_settings.imported("SCOPE") is first


def test_reload_hooks_run_when_the_settings_change() -> None:
    seen: list[int] = []
    hook = on_reload(lambda: seen.append(idempotency_settings.TTL))
    try:
        with override_settings(IDEMPOTENCY={"TTL": 9}):
            pass
    finally:
        from idempotency.conf import _reload_hooks

        _reload_hooks.remove(hook)
    assert seen == [9, DEFAULTS["TTL"]]
