"""What the tests of the system checks share: caches to configure, and the ids
``check_settings`` reports under overrides."""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.test import override_settings

from idempotency.checks import check_settings

LOCMEM = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
DUMMY = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
REDIS = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:6379/15",
    }
}
#: The same Redis through django-redis' cache (the stores accept either).
DJANGO_REDIS = {"default": {**REDIS["default"], "BACKEND": "django_redis.cache.RedisCache"}}


def one_database() -> dict[str, Any]:
    return {"default": django_settings.DATABASES["default"]}


def ids(**overrides: Any) -> list[str]:
    """The ids check_settings reports with ``overrides`` in place (one database unless
    the overrides name others)."""
    overrides.setdefault("DATABASES", one_database())
    with override_settings(**overrides):
        return [message.id or "" for message in check_settings()]


def check_messages(**overrides: Any) -> list[Any]:
    """The messages check_settings reports with ``overrides`` in place (one database
    unless the overrides name others)."""
    overrides.setdefault("DATABASES", one_database())
    with override_settings(**overrides):
        return list(check_settings())


def only(code: str, **overrides: Any) -> None:
    assert ids(**overrides) == [f"idempotency.{code}"]


def two_databases() -> dict[str, Any]:
    """The default database and a second one, ``ledger``."""
    default = django_settings.DATABASES["default"]
    return {"default": default, "ledger": {**default, "NAME": "ledger.sqlite3"}}
