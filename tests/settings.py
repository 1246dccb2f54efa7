"""Test settings: the sample project's, plus a small app of test-only views and models."""

from __future__ import annotations

from config.settings import *  # noqa: F403
from config.settings import DATABASES, INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # a second PostgreSQL database for the tests of views that write to two aliases
    DATABASES["ledger"] = {
        **DATABASES["default"],
        "NAME": f"{DATABASES['default']['NAME']}_ledger",
    }
