"""A call's arguments as data: how each type of value becomes canonical data (:func:`kind_of`,
:func:`canonical`, :func:`key_part`), keys made of a payload (:func:`payload_key`), what
counts as a missing key part, and the key and fingerprint of a call."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import hashlib
import inspect
import json
import re
import string
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from idempotency.conf import MAX_KEY_LENGTH
from idempotency.exceptions import KeyPartMissing
from idempotency.utils.hashing import fingerprint_hex, older_fingerprints


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


def is_missing(value: Any) -> bool:
    """Whether ``value`` cannot be a key part: None, empty, or a collection of those.

    ``0`` and ``False`` are values (an order number may be 0); ``""``, ``[]``, ``{}``,
    ``[None, None]`` and whitespace are not.
    """
    if value is None:
        return True
    if isinstance(value, str | bytes):
        return not value.strip()
    if isinstance(value, Mapping):
        return all(is_missing(item) for item in value.values())
    if isinstance(value, list | tuple | set | frozenset):
        return all(is_missing(item) for item in value)
    return False


class PayloadKey:
    """A key made of the SHA-256 of an argument's canonical JSON: see :func:`payload_key`."""

    def __init__(self, argument: str, paths: tuple[str, ...], prefix: str) -> None:
        self.argument = argument
        self.paths = paths
        self.prefix = prefix

    def build(self, values: Mapping[str, Any], *, owner: str) -> str:
        payload = values.get(self.argument)
        if self.paths:
            payload = {path: _at_path(payload, path) for path in self.paths}
            missing = [path for path, value in payload.items() if is_missing(value)]
        else:
            missing = [self.argument] if is_missing(payload) else []
        if missing:
            raise KeyPartMissing(
                f"The idempotency key of {owner} needs {', '.join(missing)} of argument "
                f"{self.argument!r}, which is None or empty"
            )
        return f"{self.prefix}{digest(payload)}"

    def __repr__(self) -> str:
        return f"payload_key({self.argument!r}, *{self.paths!r}, prefix={self.prefix!r})"


def payload_key(argument: str, *paths: str, prefix: str = "") -> PayloadKey:
    """A key from argument ``argument``: ``prefix`` + SHA-256 hex of its canonical JSON.

    The mapping keys are sorted, so two deliveries of one event whose keys come in another
    order share a key, and the key is 64 characters however large the payload. ``paths``
    (dotted, e.g. ``"body.order_id"``; ``"items.0.sku"`` indexes a list) hash only those
    parts of it; one that is None or empty raises
    :class:`~idempotency.exceptions.KeyPartMissing`::

        @idempotent_function(key=payload_key("event", "detail.id", prefix="evt:"))
        def on_event(event: dict) -> None: ...
    """
    if not argument or not isinstance(argument, str):
        raise TypeError("payload_key() needs the name of an argument")
    return PayloadKey(argument, tuple(paths), prefix)


def _at_path(value: Any, path: str) -> Any:
    for part in path.split("."):
        if value is None:
            return None
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list | tuple) and part.lstrip("-").isdigit():
            index = int(part)
            value = value[index] if -len(value) <= index < len(value) else None
        else:
            value = getattr(value, part, None)
    return value


#: A key: a format string of the call's arguments, a callable of them, or a PayloadKey.
KeySpec = Any
#: What goes into a call's fingerprint: every argument (None), none (False), the named
#: arguments, or a callable of the arguments returning what to hash.
FingerprintSpec = None | bool | Sequence[str] | Callable[..., Any]


class CallArguments:
    """One call's ``args`` and ``kwargs``, bound to its function's parameters at most once
    however many of the key builder and the fingerprint's hasher ask for them by name."""

    __slots__ = ("_values", "args", "kwargs")

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.args = args
        self.kwargs = kwargs
        self._values: dict[str, Any] | None = None

    def by_name(self, signature: inspect.Signature, *, owner: str) -> dict[str, Any]:
        """:func:`bound_arguments` of the call (``signature``: its function's); read only."""
        if self._values is None:
            self._values = bound_arguments(signature, self.args, self.kwargs, owner=owner)
        return self._values


#: A call's key from its arguments (see :func:`key_builder`).
Builder = Callable[[CallArguments], str]
#: The hash of what a call's fingerprint takes from its arguments (see :func:`arguments_hasher`).
Hasher = Callable[[CallArguments], bytes]


def check_key(value: Any, *, owner: str) -> str:
    """``value`` as a key: a non-empty string of at most :data:`MAX_KEY_LENGTH` characters."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise KeyPartMissing(f"The idempotency key of {owner} is empty (got {value!r})")
    if not isinstance(value, str):
        raise TypeError(
            f"The idempotency key of {owner} must be a string, got {type(value).__name__}"
        )
    if len(value) > MAX_KEY_LENGTH:
        raise ValueError(
            f"The idempotency key of {owner} is {len(value)} characters long; "
            f"at most {MAX_KEY_LENGTH} are allowed"
        )
    return value


#: A key template parsed: ``(literal text, field, format spec, conversion)`` pieces.
Pieces = list[tuple[str, str | None, str | None, str | None]]
_CONVERSIONS: dict[str, Callable[[Any], str]] = {"s": str, "r": repr, "a": ascii}


def _template_pieces(template: str) -> Pieces:
    """``template`` parsed, its replacement fields checked to be named ("{order.pk}")."""
    pieces: Pieces = list(string.Formatter().parse(template))
    for _text, field, _spec, _conversion in pieces:
        if field is None:
            continue
        root = field.split(".", 1)[0].split("[", 1)[0]
        if not root or root.isdigit():
            raise ValueError(
                f"Idempotency key template {template!r}: use named fields such as "
                "'{order_id}', not positional ones"
            )
    return pieces


def _format(pieces: Pieces, parts: Mapping[str, Any], values: Mapping[str, Any]) -> str:
    """What ``str.format`` writes, each part passed through
    :func:`key_part` first (structured values as canonical JSON)."""
    text: list[str] = []
    for literal, field, spec, conversion in pieces:
        text.append(literal)
        if field is None:
            continue
        part = key_part(parts[field], field)
        if conversion:
            part = _CONVERSIONS[conversion](part)
        if spec and "{" in spec:
            spec = spec.format(**values)
        text.append(format(part, spec or ""))
    return "".join(text)


def _field_value(field: str, values: Mapping[str, Any]) -> Any:
    """What replacement field ``field`` ("order.pk", "kwargs[tag]") names; None where a
    step of it is None (``order=None``: the key part is missing, not an error)."""
    root = _root(field)
    value = values[root]
    for attribute, index in _STEPS.findall(field[len(root) :]):
        if value is None:
            return None
        if attribute:
            value = getattr(value, attribute)
        else:
            value = value[int(index) if index.isdigit() else index]
    return value


#: The steps after a replacement field's name, as ``str.format`` reads them.
_STEPS = re.compile(r"\.([^.\[]+)|\[([^\]]+)\]")


def _root(field: str) -> str:
    return field.split(".", 1)[0].split("[", 1)[0]


def bound_arguments(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any], *, owner: str
) -> dict[str, Any]:
    """The call's arguments by name, defaults applied; ``**kwargs`` entries flattened in."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{owner}: {exc}") from exc
    bound.apply_defaults()
    values = dict(bound.arguments)
    for name, parameter in signature.parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            # "{tag}" and "{kwargs[tag]}" both reach a **kwargs argument
            for extra, value in values.get(name, {}).items():
                values.setdefault(extra, value)
    return values


def _check_names(names: Iterable[str], signature: inspect.Signature, what: str) -> None:
    parameters = signature.parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    unknown = set(names) - set(parameters)
    if unknown and not takes_any:
        raise ValueError(
            f"{what} names {', '.join(sorted(unknown))}, which has no parameter "
            f"(parameters: {', '.join(parameters) or 'none'})"
        )


def key_builder(key: KeySpec, func: Callable[..., Any], *, owner: str) -> Builder:
    """A function of a call's arguments giving its key (see ``idempotent_function``).

    A template is checked against ``func``'s signature at once, so a typo in a field
    name fails at import time rather than on the first call.
    """
    if isinstance(key, PayloadKey):
        signature = inspect.signature(func)
        _check_names([key.argument], signature, f"payload_key() of {owner}")
        spec = key

        def from_payload(call: CallArguments) -> str:
            values = call.by_name(signature, owner=owner)
            return check_key(spec.build(values, owner=owner), owner=owner)

        return from_payload
    if isinstance(key, str):
        signature = inspect.signature(func)
        pieces = _template_pieces(key)
        fields = [field for _text, field, _spec, _conversion in pieces if field is not None]
        _check_names(
            [_root(field) for field in fields],
            signature,
            f"Idempotency key template {key!r} of {owner}",
        )
        template = key

        def from_template(call: CallArguments) -> str:
            values = call.by_name(signature, owner=owner)
            try:
                parts = {field: _field_value(field, values) for field in fields}
                missing = [field for field, part in parts.items() if is_missing(part)]
                value = "" if missing else _format(pieces, parts, values)
            except NoCanonicalForm as exc:
                raise NoCanonicalForm(
                    f"Idempotency key template {template!r} of {owner}: {exc}"
                ) from None
            except (KeyError, AttributeError, IndexError, TypeError, ValueError) as exc:
                raise ValueError(
                    f"Idempotency key template {template!r} of {owner} could not be "
                    f"formatted with the call's arguments: {exc!r}"
                ) from exc
            if missing:
                raise KeyPartMissing(
                    f"The idempotency key {template!r} of {owner} needs "
                    f"{', '.join(missing)}, which is None or empty: no key is built from it"
                )
            return check_key(value, owner=owner)

        return from_template
    if callable(key) and not isinstance(key, type):
        make = key

        def from_callable(call: CallArguments) -> str:
            return check_key(make(*call.args, **call.kwargs), owner=owner)

        return from_callable
    raise TypeError(
        f"key must be a format string such as 'pay:{{trade_no}}', payload_key(...) or a "
        f"callable of the arguments, got {key!r}"
    )


# -- fingerprints of a call's owner ------------------------------------------------------


def fingerprint_of(kind: str, name: str) -> str:
    """SHA-256 hex of what owns a key: ``kind`` ("function", "task") and its name.

    The whole fingerprint of a call whose arguments are not part of it (and of every
    record stored before they were)."""
    return hashlib.sha256(f"{kind}:{name}".encode()).hexdigest()


def call_fingerprint(kind: str, name: str, arguments: bytes | None) -> str:
    """A call's fingerprint: 32 hex digits of its owner, 32 of the keyed hash of its
    arguments' digest (``arguments``, see :func:`arguments_digest`): a stored record
    gives no brute-force oracle on the arguments."""
    owner = fingerprint_of(kind, name)
    return owner if arguments is None else owner[:32] + fingerprint_hex(arguments)[:32]


def older_call_fingerprints(kind: str, name: str, arguments: bytes | None) -> list[str]:
    """What the call's fingerprint was under older secrets (rotation) and, while
    ``FINGERPRINT_ACCEPT_UNKEYED`` is on, before fingerprints were keyed."""
    if arguments is None:
        return []
    owner = fingerprint_of(kind, name)[:32]
    return [owner + older[:32] for older in older_fingerprints(arguments)]


# -- hashing what identifies a call -------------------------------------------------------


def arguments_hasher(
    spec: FingerprintSpec, func: Callable[..., Any], *, owner: str
) -> Hasher | None:
    """A function of a call's arguments giving the hash of what ``spec`` selects
    (None: the arguments are not part of the fingerprint)."""
    if spec is False:
        return None
    if spec is True:
        spec = None
    signature = inspect.signature(func)
    if callable(spec):
        select = spec

        def of_callable(call: CallArguments) -> bytes:
            return _hash_or_fail(select(*call.args, **call.kwargs), owner, "fingerprint(...)")

        return of_callable
    names: tuple[str, ...] | None = None
    if spec is not None:
        if isinstance(spec, str) or not all(isinstance(name, str) for name in spec):
            raise TypeError(
                f"fingerprint must be None, False, a list of argument names or a callable, "
                f"got {spec!r}"
            )
        names = tuple(spec)
        _check_names(names, signature, f"fingerprint= of {owner}")

    def of_arguments(call: CallArguments) -> bytes:
        values = call.by_name(signature, owner=owner)
        chosen = {
            name: value
            for name, value in values.items()
            if (name in names if names is not None else name in signature.parameters)
        }
        return _hash_or_fail(chosen, owner, "its arguments")

    return of_arguments


def _hash_or_fail(value: Any, owner: str, what: str) -> bytes:
    try:
        return arguments_digest(value)
    except TypeError as exc:
        raise TypeError(
            f"{owner}: {what} cannot be fingerprinted ({exc}). Name the arguments that "
            "identify a call with fingerprint=[...], pass fingerprint=callable, or "
            "fingerprint=False."
        ) from exc
