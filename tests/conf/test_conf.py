"""The settings object (idempotency.conf): values merged over the defaults, re-read when
the settings change, dotted paths imported once until then, and the reload hooks."""

from __future__ import annotations

import pytest
from django.test import override_settings

from idempotency.conf import DEFAULTS, idempotency_settings, on_reload


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
