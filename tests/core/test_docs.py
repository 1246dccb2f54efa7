"""The README's configuration table and the code's defaults say the same thing."""

from __future__ import annotations

import json
import re
from pathlib import Path

from idempotency.conf import DEFAULTS

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| `([A-Z_]+)` \| [^|]+ \| `([^`]*)` \| .+\|$")


def documented() -> dict[str, object]:
    rows = {}
    for line in README.read_text().splitlines():
        match = ROW.match(line)
        if match:
            rows[match.group(1)] = json.loads(match.group(2))
    return rows


def test_every_setting_is_documented_with_its_default() -> None:
    assert documented() == DEFAULTS
