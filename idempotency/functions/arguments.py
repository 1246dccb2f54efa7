"""Keys and fingerprints of a call's arguments (idempotent functions and Celery tasks).

A key comes from a format string of the bound arguments, a callable of them, or
:func:`payload_key` (the SHA-256 of an argument's canonical JSON). A key part that is
None or empty never becomes part of a key: the call raises
:class:`~idempotency.exceptions.KeyPartMissing` (a :class:`ValueError`).

A template's part that is a mapping, list, set or other structured value is written as
its canonical JSON (:func:`~idempotency.core.canonical.key_part`): one key for equal values,
whatever the order of their keys; a part with no canonical form raises ``TypeError``.

A call's fingerprint hashes its bound arguments canonically
(:func:`~idempotency.core.canonical.canonical`): mapping keys sorted, ``Decimal`` exact,
dataclasses and pydantic models by value, model instances by label and primary key, so
the same key with other arguments is told apart.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from idempotency.conf import MAX_KEY_LENGTH

# canonical, digest, qualified_name, PayloadKey and payload_key lived here: still
# importable from here
from idempotency.core.canonical import (
    NoCanonicalForm,
    arguments_digest,
    key_part,
)
from idempotency.core.canonical import canonical as canonical
from idempotency.core.canonical import digest as digest
from idempotency.core.canonical import qualified_name as qualified_name
from idempotency.core.keyed_hashes import fingerprint_hex, older_fingerprints
from idempotency.exceptions import KeyPartMissing
from idempotency.functions.payload_keys import PayloadKey as PayloadKey
from idempotency.functions.payload_keys import is_missing
from idempotency.functions.payload_keys import payload_key as payload_key

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
    :func:`~idempotency.core.canonical.key_part` first (structured values as canonical JSON)."""
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
