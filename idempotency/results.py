"""How an idempotent function's or task's result is stored, so a replay returns the
same type and value as the first call.

Results are stored as tagged JSON: plain JSON data as is, and ``Decimal`` (exact: money
never comes back as a float), ``datetime``/``date``/``time``/``timedelta``, ``UUID``,
``bytes``, tuples, sets, dicts with non-string keys, enums, dataclasses, pydantic models
and objects with ``to_dict()`` and a ``from_dict()`` classmethod tagged with their type.
A class is found again through the function's return annotation first, then by its
import path (so it must be importable, or named in the annotation). ``serializer=``
(an object with ``dumps(value)`` and ``loads(data)``, such as ``pickle``) replaces
all of that for one function.

Records stored before typed results (content type ``application/json``) are read as
plain JSON, as they were written.

With ``store_errors=True`` an exception is stored too (status 500): a replay raises an
exception of the same type with the same message, or :class:`StoredError` carrying them
where the type cannot be rebuilt from its arguments.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import json
import typing
import uuid
from collections.abc import Callable, Iterator
from importlib import import_module
from typing import Any, Protocol

from idempotency.exceptions import StoredError
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

TAG = "__idem__"


class Serializer(Protocol):
    """What ``serializer=`` takes: ``dumps(value) -> bytes | str``, ``loads(data) -> value``."""

    def dumps(self, value: Any, /) -> bytes | str: ...

    def loads(self, data: bytes, /) -> Any: ...


def class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _annotation_classes(annotation: Any) -> Iterator[type]:
    if isinstance(annotation, type):
        yield annotation
    for argument in typing.get_args(annotation):
        yield from _annotation_classes(argument)


def return_annotation(func: Callable[..., Any]) -> Any:
    """``func``'s return annotation, evaluated (None when it cannot be)."""
    try:
        return typing.get_type_hints(func).get("return")
    except Exception:  # noqa: BLE001 - a forward reference that does not resolve
        return None


def _from_dict_class(cls: type) -> bool:
    return callable(getattr(cls, "from_dict", None))


class ResultCodec:
    """Encodes a function's results and errors, and decodes them on replay."""

    def __init__(
        self, *, owner: str, annotation: Any = None, serializer: Serializer | None = None
    ) -> None:
        self.owner = owner
        self.serializer = serializer
        self.known = {class_path(cls): cls for cls in _annotation_classes(annotation)}

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
        content_type = {k.lower(): v for k, v in response.headers}.get("content-type", "")
        if content_type == CUSTOM_CONTENT_TYPE:
            if self.serializer is None:
                raise TypeError(f"{self.owner}: the stored result needs its serializer=")
            return self.serializer.loads(response.body)
        if not response.body:
            return None
        data = json.loads(response.body)
        if content_type != RESULT_CONTENT_TYPE:
            return data  # stored before typed results: plain JSON
        if response.status == ERROR_STATUS:
            raise self._error(data)
        return self.unpack(data)

    def pack(self, value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return self._tagged("enum", value, self.pack(value.value))
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, list):
            return [self.pack(item) for item in value]
        if isinstance(value, dict):
            if TAG not in value and all(isinstance(k, str) for k in value):
                return {k: self.pack(v) for k, v in value.items()}
            return {TAG: "dict", "v": [[self.pack(k), self.pack(v)] for k, v in value.items()]}
        if isinstance(value, tuple | set | frozenset):
            return {TAG: type(value).__name__, "v": [self.pack(item) for item in value]}
        if isinstance(value, decimal.Decimal):
            return {TAG: "decimal", "v": str(value)}
        if isinstance(value, datetime.datetime | datetime.date | datetime.time):
            return {TAG: type(value).__name__, "v": value.isoformat()}
        if isinstance(value, datetime.timedelta):
            return {TAG: "timedelta", "v": [value.days, value.seconds, value.microseconds]}
        if isinstance(value, uuid.UUID):
            return {TAG: "uuid", "v": str(value)}
        if isinstance(value, bytes | bytearray):
            return {TAG: "bytes", "v": base64.b64encode(bytes(value)).decode()}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {
                f.name: self.pack(getattr(value, f.name))
                for f in dataclasses.fields(value)
                if f.init
            }
            return self._tagged("dataclass", value, fields)
        if callable(getattr(value, "model_dump", None)) and callable(
            getattr(type(value), "model_validate", None)
        ):
            return self._tagged("pydantic", value, value.model_dump(mode="json"))
        if callable(getattr(value, "to_dict", None)) and _from_dict_class(type(value)):
            return self._tagged("object", value, self.pack(value.to_dict()))
        raise TypeError(f"{type(value).__name__} is not storable")

    def _tagged(self, tag: str, value: Any, data: Any) -> dict[str, Any]:
        cls = type(value)
        path = class_path(cls)
        if self.known.get(path) is not cls and self._import(path) is not cls:
            raise TypeError(
                f"{cls.__qualname__} can be found again neither by its import path nor in "
                "the return annotation"
            )
        return {TAG: tag, "cls": path, "v": data}

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
        cls = self._class(data.get("cls", ""))
        if tag == "enum":
            return cls(self.unpack(value))
        if tag == "dataclass":
            return cls(**{k: self.unpack(v) for k, v in value.items()})
        if tag == "pydantic":
            return cls.model_validate(value)  # type: ignore[attr-defined]
        if tag == "object":
            return cls.from_dict(self.unpack(value))  # type: ignore[attr-defined]
        raise ValueError(f"{self.owner}: unknown stored type {tag!r}")

    def _class(self, path: str) -> type:
        cls = self.known.get(path) or self._import(path)
        if cls is None:
            raise TypeError(f"{self.owner}: the stored result's class {path} cannot be found")
        return cls

    @staticmethod
    def _import(path: str) -> type | None:
        module_name, _, qualname = path.partition(":")
        try:
            found: Any = import_module(module_name)
            for part in qualname.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError, ValueError):
            return None
        return found if isinstance(found, type) else None

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
        path, message = str(data.get("type", "")), str(data.get("message", ""))
        cls = self._import(path)
        if cls is not None and issubclass(cls, Exception) and data.get("args") is not None:
            try:
                rebuilt = cls(*self.unpack(data["args"]))
            except Exception:  # noqa: BLE001 - a constructor with other arguments
                rebuilt = None
            if rebuilt is not None and str(rebuilt) == message:
                return rebuilt
        return StoredError(path.replace(":", "."), message)


def storable_error(exc: BaseException) -> bool:
    """Whether ``exc`` may become a stored outcome (``store_errors=True``): an ordinary
    exception of the body, not one saying the call could not run (in progress, store
    unreachable, stale owner, key mismatch) nor Celery's control flow (Retry, Reject)."""
    from idempotency.exceptions import (
        IdempotencyKeyMismatch,
        InProgress,
        StaleOwner,
        StoreUnavailable,
    )

    if not isinstance(exc, Exception):
        return False
    if isinstance(exc, InProgress | StoreUnavailable | StaleOwner | IdempotencyKeyMismatch):
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
