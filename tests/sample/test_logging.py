"""The sample's logging: each record is printed once (``LOGGING`` in config/settings.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.services import ROOT

LOG_ONCE = """
import logging, os, django
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
django.setup()
logging.getLogger("django.request").warning("django-request-line")
logging.getLogger("idempotency").warning("idempotency-line")
"""


@pytest.mark.parametrize("debug", ["1", "0"])
def test_every_log_line_is_printed_once(debug: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", LOG_ONCE],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "DEBUG": debug, "SECRET_KEY": "x" * 60},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stderr.splitlines()
    assert lines.count("django-request-line") == 1, lines
    assert lines.count("idempotency-line") == 1, lines
