"""The README's configuration table and the settings' description say the same thing."""

from __future__ import annotations

import json
import re
from pathlib import Path

from idempotency.conf import DEFAULTS, SETTINGS

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| `([A-Z_]+)` \| ([^|]+) \| `([^`]*)` \| .+\|$")


def documented() -> dict[str, tuple[str, object]]:
    rows = {}
    for line in README.read_text().splitlines():
        match = ROW.match(line)
        if match:
            rows[match.group(1)] = (match.group(2).strip(), json.loads(match.group(3)))
    return rows


def test_every_setting_is_documented_with_its_default() -> None:
    assert {name: default for name, (_type, default) in documented().items()} == DEFAULTS


def test_every_setting_is_documented_with_its_type() -> None:
    assert {name: kind for name, (kind, _default) in documented().items()} == {
        name: setting.label for name, setting in SETTINGS.items()
    }
