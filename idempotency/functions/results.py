"""How an idempotent function's or task's result is stored, so a replay returns the
same type and value as the first call.

Results are stored as tagged JSON: plain JSON data as is, and ``Decimal`` (exact: money
never comes back as a float), ``datetime``/``date``/``time``/``timedelta``, ``UUID``,
``bytes``, tuples, sets, dicts with non-string keys, enums, dataclasses, pydantic models
and objects with ``to_dict()`` and a ``from_dict()`` classmethod tagged with their type.

A store is storage, not code: a record never chooses which class is built. A tagged
value is rebuilt only into a class the function *declared*: one its return annotation
names (nested too: ``list[X]``, ``dict[str, X]``, ``X | None``, the field types of a
dataclass or pydantic model it names), or one listed in the ``RESULT_TYPES`` setting.
Nothing is imported by a name read from the store. A record naming any other class is
a forged or corrupt record: :class:`~idempotency.exceptions.StoreCorrupted` is raised
(and logged with the key's hash), and the body does not run again. A value of a class
the function did not declare is refused before it is stored (``TypeError``), so a
replay can always rebuild what the first call stored. ``serializer=`` (an object with
``dumps(value)`` and ``loads(data)``) replaces all of that for one function; whatever
it reads back is its own responsibility (``pickle`` runs what a writer of the store
put there).

Records stored before typed results (content type ``application/json``) are read as
plain JSON, as they were written.

With ``store_errors=True`` an exception is stored too (status 500): a replay raises an
exception of the same type with the same message when that type is a built-in exception
or listed in ``RESULT_TYPES`` (and can be rebuilt from its arguments), else
:class:`StoredError` carrying its name and message.
"""

from __future__ import annotations

import base64
import builtins
import dataclasses
import datetime
import decimal
import enum
import json
import typing
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeGuard

from idempotency.conf import idempotency_settings, on_reload
from idempotency.exceptions import (
    CallInProgress,
    KeyMismatch,
    StaleOwner,
    StoredError,
    StoreUnavailable,
)
from idempotency.functions.arguments import dataclass_fields, kind_of
from idempotency.stores.base import StoredResponse

#: Content type of a tagged result (typed results).
RESULT_CONTENT_TYPE = "application/vnd.idempotency.result+json"
#: Content type of results stored before typed results: plain JSON.
JSON_CONTENT_TYPE = "application/json"
#: Content type of a result written by a ``serializer=``.
CUSTOM_CONTENT_TYPE = "application/vnd.idempotency.custom"
#: Status of a stored result, and of a stored exception (``store_errors=True``).
RESULT_STATUS = 200
ERROR_STATUS = 500
#: The content types a stored result has: anything else was not written by this module.
_RESULT_TYPES = frozenset({RESULT_CONTENT_TYPE, JSON_CONTENT_TYPE, CUSTOM_CONTENT_TYPE})

TAG = "__idem__"


class Serializer(Protocol):
    """What ``serializer=`` takes: ``dumps(value) -> bytes | str``, ``loads(data) -> value``."""

    def dumps(self, value: Any, /) -> bytes | str: ...

    def loads(self, data: bytes, /) -> Any: ...


def class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


class UnreadableResult(ValueError):
    """A stored result its function cannot read back: it names a class the function does
    not declare, or it is not the JSON it should be. A forged or corrupt record
    (a replay raises ``StoreCorrupted`` for it)."""


def _field_types(cls: type) -> list[Any]:
    """The annotated field types of a dataclass or pydantic model (what it nests)."""
    if dataclasses.is_dataclass(cls):
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # noqa: BLE001 - a forward reference that does not resolve
            return []
        return [hints.get(f.name) for f in dataclasses.fields(cls)]
    fields = getattr(cls, "model_fields", None)
    if isinstance(fields, dict):
        return [getattr(info, "annotation", None) for info in fields.values()]
    return []


def declared_classes(annotation: Any) -> Iterator[type]:
    """Every class ``annotation`` names: its arguments (``list[X]``, ``dict[str, X]``,
    ``X | None``) and, for dataclasses and pydantic models, their fields' types."""
    seen: set[int] = set()
    pending = [annotation]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if typing.get_origin(current) is None and isinstance(current, type):
            yield current
            pending.extend(_field_types(current))
        pending.extend(typing.get_args(current))


_registered: dict[str, type] | None = None


def registered_classes() -> dict[str, type]:
    """The classes of the ``RESULT_TYPES`` setting, by :func:`class_path`."""
    global _registered
    if _registered is None:
        from django.utils.module_loading import import_string

        found: dict[str, type] = {}
        for path in idempotency_settings.RESULT_TYPES:
            cls = import_string(path) if isinstance(path, str) else path
            for each in declared_classes(cls):
                found[class_path(each)] = each
        _registered = found
    return _registered


@on_reload
def _forget_registered() -> None:
    global _registered
    _registered = None


def return_annotation(func: Callable[..., Any]) -> Any:
    """``func``'s return annotation, evaluated (None when it cannot be)."""
    try:
        return typing.get_type_hints(func).get("return")
    except Exception:  # noqa: BLE001 - a forward reference that does not resolve
        return None


class _FromDict(Protocol):
    """A class that stores its instances as ``to_dict()`` and reads them back."""

    @classmethod
    def from_dict(cls, data: Any, /) -> Any: ...


class _Pydantic(Protocol):
    """A pydantic model class (pydantic is not a dependency)."""

    @classmethod
    def model_validate(cls, value: Any, /) -> Any: ...


def _from_dict_class(cls: type) -> TypeGuard[type[_FromDict]]:
    return callable(getattr(cls, "from_dict", None))


def _pydantic_class(cls: type) -> TypeGuard[type[_Pydantic]]:
    return callable(getattr(cls, "model_validate", None))


class ResultCodec:
    """Encodes a function's results and errors, and decodes them on replay."""

    def __init__(
        self, *, owner: str, annotation: Any = None, serializer: Serializer | None = None
    ) -> None:
        self.owner = owner
        self.serializer = serializer
        #: The classes the return annotation declares, by :func:`class_path`
        self.known = {class_path(cls): cls for cls in declared_classes(annotation)}

    # -- results ---------------------------------------------------------------------

    def encode(self, value: Any) -> StoredResponse:
        """``value`` as a stored response; :class:`TypeError` when it cannot be stored."""
        if self.serializer is not None:
            data = self.serializer.dumps(value)
            body = data.encode() if isinstance(data, str) else bytes(data)
            return StoredResponse(RESULT_STATUS, [("Content-Type", CUSTOM_CONTENT_TYPE)], body)
        try:
            text = json.dumps(self.pack(value), separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{self.owner} returned a {type(value).__name__} that cannot be stored "
                f"({exc}). Results are stored as JSON with Decimal, datetime, date, UUID, "
                "bytes, tuples, sets, enums, dataclasses, pydantic models and objects with "
                "to_dict()/from_dict() kept by type; pass serializer= for anything else. "
                "The key was released; nothing was stored."
            ) from exc
        return StoredResponse(RESULT_STATUS, [("Content-Type", RESULT_CONTENT_TYPE)], text.encode())

    def decode(self, response: StoredResponse | None) -> Any:
        """The value a stored response holds; a stored exception is raised."""
        if response is None:
            return None
        if response.status not in (RESULT_STATUS, ERROR_STATUS):
            # a result is stored 200, an exception 500: any other status was not ours
            raise UnreadableResult(
                f"{self.owner}: the stored status {response.status!r} is no result's"
            )
        content_type = {k.lower(): v for k, v in response.headers}.get("content-type", "")
        if content_type not in _RESULT_TYPES:
            raise UnreadableResult(
                f"{self.owner}: the stored content type {content_type[:60]!r} is no result's"
            )
        if content_type == CUSTOM_CONTENT_TYPE:
            if self.serializer is None:
                raise UnreadableResult(f"{self.owner}: the stored result needs its serializer=")
            return self.serializer.loads(response.body)
        if not response.body:
            return None
        try:
            data = json.loads(response.body)
        except ValueError as exc:
            raise UnreadableResult(f"{self.owner}: the stored result is not JSON") from exc
        if content_type != RESULT_CONTENT_TYPE:
            return data  # stored before typed results: plain JSON
        if response.status == ERROR_STATUS:
            raise self._error(data)
        return self.unpack(data)

    def pack(self, value: Any) -> Any:
        """``value`` as tagged JSON data (its kind by
        :func:`~idempotency.functions.arguments.kind_of`, the one place that tells the types
        apart)."""
        kind = kind_of(value)
        if kind in ("none", "bool", "int", "float", "str"):
            return value
        if kind == "list":
            return [self.pack(item) for item in value]
        if kind == "dict":
            if TAG not in value and all(isinstance(k, str) for k in value):
                return {k: self.pack(v) for k, v in value.items()}
            return {TAG: "dict", "v": [[self.pack(k), self.pack(v)] for k, v in value.items()]}
        if kind in ("tuple", "set", "frozenset"):
            return {TAG: kind, "v": [self.pack(item) for item in value]}
        if kind in ("decimal", "uuid"):
            return {TAG: kind, "v": str(value)}
        if kind in ("datetime", "date", "time"):
            return {TAG: kind, "v": value.isoformat()}
        if kind == "timedelta":
            return {TAG: kind, "v": [value.days, value.seconds, value.microseconds]}
        if kind == "bytes" and not isinstance(value, memoryview):
            return {TAG: kind, "v": base64.b64encode(bytes(value)).decode()}
        if kind == "enum":
            return self._tagged("enum", value, self.pack(value.value))
        if kind == "dataclass":
            fields = dataclass_fields(value, init_only=True)
            return self._tagged("dataclass", value, {k: self.pack(v) for k, v in fields.items()})
        if kind == "pydantic" and callable(getattr(type(value), "model_validate", None)):
            return self._tagged("pydantic", value, value.model_dump(mode="json"))
        if kind == "object" and _from_dict_class(type(value)):
            return self._tagged("object", value, self.pack(value.to_dict()))
        raise TypeError(f"{type(value).__name__} is not storable")

    def _tagged(self, tag: str, value: Any, data: Any) -> dict[str, Any]:
        cls = type(value)
        path = class_path(cls)
        if self._declared(path) is not cls:
            raise TypeError(
                f"{cls.__qualname__} is not declared: name it in the return annotation "
                "(or list it in the RESULT_TYPES setting) so a replay may rebuild it"
            )
        return {TAG: tag, "cls": path, "v": data}

    def _declared(self, path: str) -> type | None:
        return self.known.get(path) or registered_classes().get(path)

    def unpack(self, data: Any) -> Any:
        if isinstance(data, list):
            return [self.unpack(item) for item in data]
        if not isinstance(data, dict):
            return data
        tag = data.get(TAG)
        if tag is None:
            return {k: self.unpack(v) for k, v in data.items()}
        value: Any = data.get("v")
        simple = _SIMPLE.get(tag)
        if simple is not None:
            return simple(self, value)
        cls = self._class(data.get("cls"))
        if tag == "enum" and issubclass(cls, enum.Enum):
            return cls(self.unpack(value))
        if tag == "dataclass" and dataclasses.is_dataclass(cls) and isinstance(value, dict):
            return cls(**{k: self.unpack(v) for k, v in value.items()})
        if tag == "pydantic" and _pydantic_class(cls):
            return cls.model_validate(value)
        if tag == "object" and _from_dict_class(cls):
            return cls.from_dict(self.unpack(value))
        raise UnreadableResult(f"{self.owner}: the stored type {str(tag)[:50]!r} does not fit")

    def _class(self, path: Any) -> type:
        cls = self._declared(path) if isinstance(path, str) else None
        if cls is None:
            raise UnreadableResult(
                f"{self.owner}: the stored result names the class {str(path)[:200]!r}, "
                "which the function does not declare (return annotation, RESULT_TYPES)"
            )
        return cls

    # -- errors (store_errors=True) --------------------------------------------------

    def encode_error(self, exc: BaseException) -> StoredResponse:
        try:
            arguments = self.pack(list(exc.args))
            json.dumps(arguments)
        except (TypeError, ValueError):
            arguments = None
        body = {"type": class_path(type(exc)), "message": str(exc), "args": arguments}
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        return StoredResponse(ERROR_STATUS, [("Content-Type", RESULT_CONTENT_TYPE)], data)

    def _error(self, data: dict[str, Any]) -> BaseException:
        """The stored exception: rebuilt when its type is a built-in exception or
        declared (``RESULT_TYPES``), else :class:`StoredError` with its name and message."""
        path, message = str(data.get("type", "")), str(data.get("message", ""))
        cls = self._exception_class(path)
        if cls is not None and data.get("args") is not None:
            arguments = self.unpack(data["args"])
            try:
                rebuilt = cls(*arguments) if isinstance(arguments, list) else None
            except Exception:  # noqa: BLE001 - a constructor with other arguments
                rebuilt = None
            if rebuilt is not None and str(rebuilt) == message:
                return rebuilt
        return StoredError(path.replace(":", "."), message)

    def _exception_class(self, path: str) -> type[Exception] | None:
        module, _, name = path.partition(":")
        if module == "builtins":
            found = getattr(builtins, name, None)
        else:
            found = registered_classes().get(path)
        if isinstance(found, type) and issubclass(found, Exception):
            return found
        return None


def storable_error(exc: BaseException) -> bool:
    """Whether ``exc`` may become a stored outcome (``store_errors=True``): an ordinary
    exception of the body, not one saying the call could not run (in progress, store
    unreachable, stale owner, key mismatch) nor Celery's control flow (Retry, Reject)."""
    if not isinstance(exc, Exception):
        return False
    if isinstance(exc, CallInProgress | StoreUnavailable | StaleOwner | KeyMismatch):
        return False
    return not type(exc).__module__.startswith("celery.")


def _tuple(codec: ResultCodec, value: Any) -> Any:
    return tuple(codec.unpack(item) for item in value)


_SIMPLE: dict[str, Callable[[ResultCodec, Any], Any]] = {
    "dict": lambda codec, v: {codec.unpack(k): codec.unpack(i) for k, i in v},
    "tuple": _tuple,
    "set": lambda codec, v: {codec.unpack(item) for item in v},
    "frozenset": lambda codec, v: frozenset(codec.unpack(item) for item in v),
    "decimal": lambda codec, v: decimal.Decimal(v),
    "datetime": lambda codec, v: datetime.datetime.fromisoformat(v),
    "date": lambda codec, v: datetime.date.fromisoformat(v),
    "time": lambda codec, v: datetime.time.fromisoformat(v),
    "timedelta": lambda codec, v: datetime.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    "uuid": lambda codec, v: uuid.UUID(v),
    "bytes": lambda codec, v: base64.b64decode(v),
}
