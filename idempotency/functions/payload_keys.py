"""Keys made of an argument's payload (:func:`payload_key`), and what counts as a missing
key part (:func:`is_missing`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from idempotency.core.canonical import digest
from idempotency.exceptions import KeyPartMissing


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
