"""The settings table (idempotency.conf.schema): every default is valid by its own
description, and what follows from the table agrees with it (the reference page is
checked against it in tests/docs/test_reference.py)."""

from __future__ import annotations

from django.utils.module_loading import import_string

from idempotency.conf import DEFAULTS, IMPORT_STRINGS, MODES, SETTINGS


def test_every_default_is_a_value_its_setting_accepts() -> None:
    assert [name for name, s in SETTINGS.items() if not s.accepts(s.default)] == []


def test_every_dotted_path_default_imports() -> None:
    assert {name for name, s in SETTINGS.items() if s.kind == "path"} == IMPORT_STRINGS
    # a path setting that may be None (ON_REPLAY: no hook) defaults to None
    defaulted = {name for name in IMPORT_STRINGS if DEFAULTS[name] is not None}
    assert {name for name in IMPORT_STRINGS - defaulted if SETTINGS[name].nullable} == {"ON_REPLAY"}
    assert {name: callable(import_string(DEFAULTS[name])) for name in defaulted} == dict.fromkeys(
        defaulted, True
    )


def test_the_modes_are_the_mode_settings_choices() -> None:
    assert SETTINGS["MODE"].choices == MODES == ("auto", "atomic", "lease")
    assert DEFAULTS["MODE"] in MODES
