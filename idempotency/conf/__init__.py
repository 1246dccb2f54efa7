"""Settings of django-idempotency: one ``IDEMPOTENCY`` dict, each setting described once.

:data:`SETTINGS` describes every setting (:mod:`idempotency.conf.schema`): its default,
its meaning, its type, its choices or bounds and whether it may be None, each a
:class:`Setting` (:mod:`idempotency.conf.setting`, which also says which values it
accepts). The system checks (:mod:`idempotency.checks`) validate ``IDEMPOTENCY``
against that description, and a test keeps the settings reference
(docs/reference/settings.md) in step with it.

Read the values through :data:`idempotency_settings`; it re-reads Django's settings
whenever they change (``override_settings`` included), and resolves dotted
paths once until then. Defaults are never written into ``django.conf.settings``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from idempotency.conf import schema
from idempotency.conf.schema import IMPORT_STRINGS
from idempotency.conf.setting import HEADER_NAME, KINDS, Setting

#: The values of ``MODE``, and of ``mode=`` on views, functions and tasks.
MODES = schema.MODES

#: Longest idempotency key a store accepts (``IdempotencyRecord.key``), whether it comes
#: from a request's header or from a function's or task's key.
MAX_KEY_LENGTH = 255

#: Every setting, described once. The settings reference is checked against it.
SETTINGS: dict[str, Setting] = schema.SETTINGS

#: Every setting's default, by name.
DEFAULTS: dict[str, Any] = schema.DEFAULTS


class IdempotencySettings:
    """Attribute access to ``settings.IDEMPOTENCY`` merged over :data:`DEFAULTS`."""

    def __init__(self) -> None:
        self._cache: dict[str, Callable[..., Any]] = {}

    @property
    def user_settings(self) -> dict[str, Any]:
        value = getattr(settings, "IDEMPOTENCY", None) or {}
        if not isinstance(value, dict):
            return {}
        return value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in DEFAULTS:
            raise AttributeError(f"Invalid idempotency setting: {name!r}")
        value = self.user_settings.get(name, DEFAULTS[name])
        # kept as an instance attribute: the next read is a plain attribute lookup, not
        # a call of this method (settings are read several times per request)
        self.__dict__[name] = value
        return value

    def imported(self, name: str) -> Callable[..., Any]:
        """The object a dotted-path setting names, imported once."""
        key = f"__imported__{name}"
        try:
            return self._cache[key]
        except KeyError:
            pass
        value = getattr(self, name)
        obj: Callable[..., Any] = import_string(value) if isinstance(value, str) else value
        self._cache[key] = obj
        return obj

    def reload(self) -> None:
        self._cache.clear()
        for name in DEFAULTS:
            self.__dict__.pop(name, None)


idempotency_settings = IdempotencySettings()

_reload_hooks: list[Callable[[], None]] = []


def on_reload(func: Callable[[], None]) -> Callable[[], None]:
    """Register ``func`` to run whenever ``IDEMPOTENCY`` or ``CACHES`` change."""
    _reload_hooks.append(func)
    return func


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in {"IDEMPOTENCY", "CACHES", "DATABASES", "SECRET_KEY", "SECRET_KEY_FALLBACKS"}:
        idempotency_settings.reload()
        for hook in _reload_hooks:
            hook()


setting_changed.connect(_settings_changed)


__all__ = [
    "DEFAULTS",
    "HEADER_NAME",
    "IMPORT_STRINGS",
    "KINDS",
    "MAX_KEY_LENGTH",
    "MODES",
    "SETTINGS",
    "IdempotencySettings",
    "Setting",
    "idempotency_settings",
    "on_reload",
]
