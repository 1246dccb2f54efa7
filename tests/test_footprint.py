"""What a reader faces, measured from outside (``python -m bench.footprint``): the package's
modules a keyed DRF POST on ``DatabaseStore`` loads, with their lines, and the package's
own size. The ceilings are today's figures: a change that grows them fails here, and a
change that shrinks them lowers them (issue 45's targets: 30 modules and 6,000 lines per
request, 70 modules and 13,000 lines in the package)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

REQUEST_MODULES = 37
REQUEST_LINES = 9_397
PACKAGE_MODULES = 77
PACKAGE_LINES = 18_435


@pytest.fixture(scope="module")
def footprint() -> dict[str, Any]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    found = subprocess.run(
        [sys.executable, "-m", "bench.footprint"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode == 0, found.stdout + found.stderr
    result: dict[str, Any] = json.loads(found.stdout)
    return result


def test_a_keyed_post_is_served_and_replayed(footprint: dict[str, Any]) -> None:
    assert footprint["request_statuses"] == [201, 201]


def test_a_keyed_drf_post_loads_no_more_of_the_package_than_before(
    footprint: dict[str, Any],
) -> None:
    assert footprint["request_modules"] <= REQUEST_MODULES
    assert footprint["request_lines"] <= REQUEST_LINES


def test_the_package_grows_no_larger(footprint: dict[str, Any]) -> None:
    assert footprint["package_modules"] <= PACKAGE_MODULES
    assert footprint["package_lines"] <= PACKAGE_LINES
