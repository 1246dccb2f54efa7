"""Each value of ``IDEMPOTENCY`` against its description in
:data:`idempotency.conf.SETTINGS`: known keys (E002), types, choices and bounds (E004,
E010, E011, E014, E016), importable paths (E005), installed extras (E018, E043), a
body codec that can be built (E040) and, for ``check --deploy``, problem types that link
to the project's own documentation (W041)."""

from __future__ import annotations

import difflib
import importlib.util
from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from idempotency.checks.messages import message
from idempotency.conf import DEFAULTS, HEADER_NAME, SETTINGS
from idempotency.http.responses import NEVER_REPLAYED

#: The id a value outside its description gets, by kind of setting (others: E004).
_CODE_OF_KIND = {"choice": "E014", "header": "E010"}


class _Hidden:
    """What a check shows instead of a secret setting's value."""

    def __repr__(self) -> str:
        return "<hidden>"


_HIDDEN = _Hidden()


def raw_settings() -> dict[Any, Any] | None:
    """``settings.IDEMPOTENCY`` as written (``{}`` when unset), or None when it is no
    dict (E001)."""
    raw = getattr(settings, "IDEMPOTENCY", None)
    return {} if raw is None else raw if isinstance(raw, dict) else None


def check_keys(raw: dict[Any, Any]) -> list[checks.CheckMessage]:
    """E002 for every key that names no setting, with the closest one suggested."""
    errors = []
    valid = sorted(SETTINGS)
    for key in raw:
        if key in SETTINGS:
            continue
        close = difflib.get_close_matches(str(key).upper(), valid, n=1)
        suggestion = f"Did you mean {close[0]!r}? " if close else ""
        errors.append(message("E002", key=key, suggestion=suggestion, valid=", ".join(valid)))
    return errors


def check_values(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """Every value against its description in :data:`~idempotency.conf.SETTINGS`."""
    errors = []
    for name, setting in SETTINGS.items():
        value = values[name]
        if setting.kind == "path":
            if value is not None or not setting.nullable:
                errors += check_import(name, value)
        elif not setting.accepts(value):
            code = _CODE_OF_KIND.get(setting.kind, "E004")
            shown = _HIDDEN if setting.secret else value
            errors.append(
                message(code, name=name, value=shown, expected=setting.expected, help=setting.help)
            )
        elif setting.kind == "headers":
            errors += [
                message("E010", name=name, value=header)
                for header in value
                if not HEADER_NAME.match(header)
            ]
    replayed = values["REPLAY_HEADERS"]
    if SETTINGS["REPLAY_HEADERS"].accepts(replayed):
        errors += [message("E011", header=h) for h in replayed if h.lower() in NEVER_REPLAYED]
    if values["METRICS"] and importlib.util.find_spec("prometheus_client") is None:
        errors.append(message("E018"))
    if values["OPENTELEMETRY"] and not _installed("opentelemetry", "opentelemetry.trace"):
        errors.append(message("E043"))
    ttl, lease = values["TTL"], values["LEASE"]
    if SETTINGS["TTL"].accepts(ttl) and SETTINGS["LEASE"].accepts(lease) and ttl < lease:
        errors.append(message("E016", ttl=ttl, lease=lease))
    return errors


def _installed(*modules: str) -> bool:
    """Whether every module is importable (a dotted one only once its parent is)."""
    return all(importlib.util.find_spec(module) is not None for module in modules)


def check_import(name: str, value: Any) -> list[checks.CheckMessage]:
    """E005 when the dotted-path setting ``name`` cannot be imported (an object given
    instead of a path passes)."""
    try:
        if not isinstance(value, str):
            if callable(value):
                return []
            raise ImportError("not a dotted path")
        import_string(value)
    except Exception as exc:  # noqa: BLE001 - any failure to import is reported
        return [message("E005", name=name, value=value, error=exc, default=DEFAULTS[name])]
    return []


def check_codec(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """E040: BODY_CODEC names a codec that cannot be built (FernetCodec without keys or
    without cryptography; a class that is no BodyCodec). Its message never shows a key."""
    from django.core.exceptions import ImproperlyConfigured

    from idempotency.codecs import BodyCodec

    configured = values["BODY_CODEC"]
    if check_import("BODY_CODEC", configured):
        return []  # E005
    try:
        obj = import_string(configured) if isinstance(configured, str) else configured
        codec = obj() if isinstance(obj, type) else obj
    except (ImproperlyConfigured, TypeError, ValueError) as exc:
        return [message("E040", error=exc)]
    if not isinstance(codec, BodyCodec):
        return [message("E040", error=f"{type(codec).__name__} is not a BodyCodec")]
    return []


def check_problem_type_base(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """W041 (``check --deploy``): ``PROBLEM_TYPE_BASE`` is still the default, whose domain
    nobody here owns: every error's ``type`` would link to a page that documents nothing
    (or to whatever someone who registers the domain puts there)."""
    base = values["PROBLEM_TYPE_BASE"]
    if base != DEFAULTS["PROBLEM_TYPE_BASE"]:
        return []
    return [message("W041", base=base)]
