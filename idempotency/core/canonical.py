"""How each type of value becomes data: the one place that tells the types apart.

:func:`kind_of` names what a value is (``"decimal"``, ``"dict"``, ``"dataclass"``, ...),
testing the types in one order. Three readers build on it:

- :func:`canonical`: the value as plain JSON data that is equal exactly when the values
  are, for hashing (a call's fingerprint, :func:`~idempotency.functions.arguments.payload_key`);
- :func:`key_part`: a part of a key template as text (``key="sort:{payload}"``): a
  mapping, list, set or other structured value as its canonical JSON, so equal values
  give one key whatever the order of their keys;
- :class:`~idempotency.functions.results.ResultCodec`: a function's result as tagged JSON, rebuilt
  on replay only into the classes the function declares.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import hashlib
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any


class NoCanonicalForm(TypeError):
    """A key template's part has no canonical text (:func:`key_part`)."""


#: The kinds of value whose text is their own in a key template (``str.format``'s).
SCALARS = frozenset(
    {
        "bool",
        "int",
        "str",
        "float",
        "decimal",
        "datetime",
        "date",
        "time",
        "timedelta",
        "uuid",
        "bytes",
        "enum",
    }
)

#: ``(kind, test)`` in the order they are tried: an enum before the int or str it may
#: be, a bool before an int, a datetime before a date, a dict before other mappings.
_TESTS: tuple[tuple[str, Callable[[type], bool]], ...] = (
    ("enum", lambda cls: issubclass(cls, enum.Enum)),
    ("bool", lambda cls: issubclass(cls, bool)),
    ("int", lambda cls: issubclass(cls, int)),
    ("str", lambda cls: issubclass(cls, str)),
    ("float", lambda cls: issubclass(cls, float)),
    ("decimal", lambda cls: issubclass(cls, decimal.Decimal)),
    ("datetime", lambda cls: issubclass(cls, datetime.datetime)),
    ("date", lambda cls: issubclass(cls, datetime.date)),
    ("time", lambda cls: issubclass(cls, datetime.time)),
    ("timedelta", lambda cls: issubclass(cls, datetime.timedelta)),
    ("uuid", lambda cls: issubclass(cls, uuid.UUID)),
    ("bytes", lambda cls: issubclass(cls, bytes | bytearray | memoryview)),
    ("list", lambda cls: issubclass(cls, list)),
    ("tuple", lambda cls: issubclass(cls, tuple)),
    ("dict", lambda cls: issubclass(cls, dict)),
    ("mapping", lambda cls: issubclass(cls, Mapping)),
    ("set", lambda cls: issubclass(cls, set)),
    ("frozenset", lambda cls: issubclass(cls, frozenset)),
    ("dataclass", dataclasses.is_dataclass),
    ("model", lambda cls: hasattr(getattr(cls, "_meta", None), "label") and hasattr(cls, "pk")),
    ("pydantic", lambda cls: callable(getattr(cls, "model_dump", None))),
    ("object", lambda cls: callable(getattr(cls, "to_dict", None))),
)

#: :func:`kind_of` by type, filled as types are met (a type's kind never changes).
_KINDS: dict[type, str] = {type(None): "none"}


def kind_of(value: Any) -> str:
    """What ``value`` is: ``"none"``, one of :data:`SCALARS`, ``"list"``, ``"tuple"``,
    ``"dict"``, ``"mapping"`` (another Mapping), ``"set"``, ``"frozenset"``,
    ``"dataclass"``, ``"model"`` (a Django model instance), ``"pydantic"``,
    ``"object"`` (one with ``to_dict()``) or ``"unknown"``."""
    cls = type(value)
    try:
        return _KINDS[cls]
    except KeyError:
        pass
    kind = next((name for name, test in _TESTS if test(cls)), "unknown")
    _KINDS[cls] = kind
    return kind


def qualified_name(obj: Any) -> str:
    """``module.qualname`` of a function or class."""
    module = getattr(obj, "__module__", None) or "?"
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    return f"{module}.{name}"


def dataclass_fields(value: Any, *, init_only: bool = False) -> dict[str, Any]:
    """A dataclass instance's fields by name (only those ``__init__`` takes: ``init_only``)."""
    return {
        f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init or not init_only
    }


# -- canonical data, for hashing ------------------------------------------------------------


def canonical(value: Any) -> Any:
    """``value`` as plain JSON data that is equal exactly when the values are.

    Mapping keys sorted, sets sorted, ``Decimal`` exact (by value: ``10.0`` and ``10.00``
    are one amount), floats by their shortest ``repr``, dates and times in ISO 8601,
    dataclasses, pydantic models and objects with ``to_dict()`` by value, Django model
    instances by label and primary key (their other fields may change between a call
    and its retry). An enum that is also an int or str is that int or str (it equals
    it). Anything else raises :class:`TypeError`.
    """
    kind = kind_of(value)
    if kind in ("none", "bool", "int", "str"):
        return value
    if kind == "enum":
        if isinstance(value, int | str):
            return value
        return {"$enum": qualified_name(type(value)), "value": canonical(value.value)}
    if kind == "float":
        return {"$float": repr(value)}
    if kind == "decimal":
        return {"$decimal": str(value.normalize()) if value.is_finite() else str(value)}
    if kind in ("datetime", "date", "time"):
        return {"$" + kind: value.isoformat()}
    if kind == "timedelta":
        return {"$timedelta": value.total_seconds()}
    if kind == "uuid":
        return {"$uuid": str(value)}
    if kind == "bytes":
        return {"$bytes": bytes(value).hex()}
    if kind in ("dict", "mapping"):
        pairs = ([canonical(k), canonical(v)] for k, v in value.items())
        return {"$map": sorted(pairs, key=canonical_json)}
    if kind in ("list", "tuple"):
        return [canonical(item) for item in value]
    if kind in ("set", "frozenset"):
        return {"$set": sorted((canonical(item) for item in value), key=canonical_json)}
    if kind == "dataclass":
        fields = canonical(dataclass_fields(value))
        return {"$dataclass": qualified_name(type(value)), "fields": fields}
    if kind == "model":
        return {"$model": value._meta.label, "pk": canonical(value.pk)}
    if kind == "pydantic":
        return {"$pydantic": qualified_name(type(value)), "fields": canonical(value.model_dump())}
    if kind == "object":
        return {"$object": qualified_name(type(value)), "fields": canonical(value.to_dict())}
    raise TypeError(f"cannot hash a {type(value).__name__} canonically")


#: Built once: ``json.dumps`` with options builds a new encoder on every call.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """The compact JSON text of canonical data (keys sorted)."""
    return _ENCODER.encode(value)


def arguments_digest(value: Any) -> bytes:
    """The SHA-256 digest of ``value``'s canonical JSON."""
    return hashlib.sha256(canonical_json(canonical(value)).encode()).digest()


def digest(value: Any) -> str:
    """SHA-256 hex of ``value``'s canonical JSON (keys built from a payload)."""
    return arguments_digest(value).hex()


# -- key template parts ------------------------------------------------------------------------


def key_part(value: Any, field: str) -> Any:
    """What the replacement field ``field`` of a key template formats: ``value`` itself
    when it is a scalar (:data:`SCALARS`: ``str.format`` writes it, a format spec such as
    ``{amount:.2f}`` applies) or has a ``__str__`` or ``__format__`` of its own; the
    canonical JSON of a structured value (a mapping, list, tuple, set, dataclass,
    pydantic model, object with ``to_dict()``, Django model instance: label and primary
    key), so equal values give one key.

    Raises:
        NoCanonicalForm: (a ``TypeError``) ``value`` has no canonical form (its text
            would be its ``repr``, which may name a memory address and differ in every
            process); the message names ``field``.
    """
    kind = kind_of(value)
    if kind in SCALARS:
        return value
    cls = type(value)
    if kind == "unknown":
        own_str = getattr(cls, "__str__", None) is not object.__str__
        if own_str or getattr(cls, "__format__", None) is not object.__format__:
            return value
        raise NoCanonicalForm(_no_text(field, cls, "its str() is its repr"))
    try:
        return canonical_json(canonical(value))
    except TypeError as exc:
        raise NoCanonicalForm(_no_text(field, cls, str(exc))) from exc


def _no_text(field: str, cls: type, why: str) -> str:
    return (
        f"the key part {{{field}}} is a {cls.__name__}, which has no canonical text ({why}): "
        f"format one of its attributes ('{{{field}.id}}'), give its class a __str__, or "
        "build the key with payload_key() or a callable"
    )
