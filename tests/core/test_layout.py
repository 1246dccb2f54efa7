"""The package's shape: documented dotted paths keep working, and importing is lazy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.utils.module_loading import import_string

#: Paths that users may have in their settings, each with the object's home today.
COMPATIBILITY_PATHS = [
    (
        "idempotency.middleware.IdempotencyMiddleware",
        "idempotency.http.middleware.IdempotencyMiddleware",
    ),
    (
        "idempotency.fingerprints.request_fingerprint",
        "idempotency.http.fingerprints.request_fingerprint",
    ),
]


@pytest.mark.parametrize(("old", "new"), COMPATIBILITY_PATHS)
def test_a_compatibility_path_names_the_same_object(old: str, new: str) -> None:
    assert import_string(old) is import_string(new)


def test_importing_the_package_imports_none_of_its_modules() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = (
        "import sys, idempotency; "
        "loaded = sorted(m for m in sys.modules if m.startswith('idempotency.')); "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
