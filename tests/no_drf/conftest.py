"""This suite runs only on its own settings (``--ds tests.no_drf.settings``, in a
virtualenv of the ``no-drf`` group: .ci/run's core stream); the other tiers, whose
virtualenvs hold DRF, do not collect it."""

from __future__ import annotations

import os

if os.environ.get("DJANGO_SETTINGS_MODULE") != "tests.no_drf.settings":
    collect_ignore_glob = ["test_*.py"]
