"""One setting's description (:class:`Setting`): its default, meaning, kind, choices or
bounds, and which values it accepts. The system checks validate ``IDEMPOTENCY`` with it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

#: An HTTP header name (RFC 9110 token).
HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")

#: What a setting's value may be. ``seconds``: a finite number; ``integer``: an int;
#: ``choice``: one of :attr:`Setting.choices`; ``path``: a dotted path (or the object
#: itself);
#: ``header``/``headers``: one or a list of header names; ``cache``/``database``: an alias;
#: ``aliases``: a list of database aliases; ``names``: a list of strings; ``backends``:
#: a dict of aliases, each an entry as in ``CACHES`` (:mod:`idempotency.core.backends`
#: reads and checks each entry). Each
#: with the type the settings table names it by.
_LABELS = {
    "bool": "bool",
    "text": "str",
    "seconds": "seconds",
    "integer": "int",
    "choice": "str",
    "path": "dotted path",
    "header": "str",
    "headers": "list of str",
    "names": "list of str",
    "cache": "str",
    "database": "str",
    "aliases": "list of str",
    "backends": "dict of aliases",
}
KINDS = tuple(_LABELS)


@dataclass(frozen=True)
class Setting:
    """One setting: its default, what it means and which values it takes."""

    default: Any
    #: What the setting means (the system checks' hint for a wrong value).
    help: str
    kind: str
    #: ``choice``: the accepted values.
    choices: tuple[str, ...] = ()
    #: ``seconds``/``integer``: the lower bound, and whether it is allowed itself.
    minimum: float = 0
    inclusive: bool = False
    #: Whether None is a value of its own (documented in ``help``).
    nullable: bool = False
    #: Whether the value is a secret: the checks never show it.
    secret: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown setting kind {self.kind!r}")

    @property
    def label(self) -> str:
        """The type as the settings reference (docs/reference/settings.md) names it."""
        label = _LABELS[self.kind]
        return f"{label} or None" if self.nullable else label

    @property
    def expected(self) -> str:
        """What a valid value is, in words."""
        bound = f"{'>=' if self.inclusive else '>'} {self.minimum:g}"
        text = {
            "bool": "True or False",
            "seconds": f"a number {bound}",
            "integer": f"an integer {bound}",
            "choice": "one of " + ", ".join(repr(c) for c in self.choices),
            "path": "the dotted path of an importable object",
            "header": "a header name",
            "headers": "a list of header names",
            "names": "a list of strings",
            "aliases": "a list of database aliases",
            "backends": "a dict of aliases, each a dict with a BACKEND",
        }.get(self.kind, "a string")
        return f"None or {text}" if self.nullable else text

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` has this setting's type, choices and bounds (dotted paths
        are only checked to be paths or objects here: importing them is the checks')."""
        if value is None:
            return self.nullable
        kind = self.kind
        if kind == "bool":
            return isinstance(value, bool)
        if kind in ("seconds", "integer"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                return False
            if kind == "integer" and not isinstance(value, int):
                return False
            if not math.isfinite(value):
                return False
            return bool(value >= self.minimum if self.inclusive else value > self.minimum)
        if kind == "choice":
            return value in self.choices
        if kind == "path":
            return isinstance(value, str) or callable(value)
        if kind == "header":
            return isinstance(value, str) and bool(HEADER_NAME.match(value))
        if kind == "backends":  # each entry is the checks' (E044-E046, E060-E064)
            return isinstance(value, dict) and all(isinstance(a, str) for a in value)
        if kind in ("headers", "names", "aliases"):
            return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
        return isinstance(value, str)
