"""How every pluggable part (stores, token backends, lock backends) is chosen: a dotted
path, a class or an instance, resolved once and kept until the settings change.

A :class:`Pluggable` describes one kind of part: the setting that names the default, the
base class every choice subclasses, and the short names kept as aliases of dotted paths
(``"redis"`` for ``"idempotency.locks.redis.RedisLockBackend"``). A dotted path or class
is instantiated with no arguments once per process; an instance is used as it is.

A value that names no usable class raises :class:`UnusableBackend` (an
:class:`~django.core.exceptions.ImproperlyConfigured`) at use, and the system checks
report the same problem at startup (``idempotency.E044``, ``E045``, ``E046``) with the
same words.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from idempotency.conf import idempotency_settings, on_reload

T = TypeVar("T")

#: What a value may be wrong by, with the id of the system check that reports it.
CANNOT_IMPORT, NOT_A_SUBCLASS, ABSTRACT = "E044", "E045", "E046"


class UnusableBackend(ImproperlyConfigured):
    """A setting or argument names no usable class; ``code`` is the check's id."""

    def __init__(self, code: str, text: str, hint: str) -> None:
        super().__init__(f"{text} {hint}")
        self.code = code
        self.text = text
        self.hint = hint


def class_path(cls: type) -> str:
    """The dotted path of ``cls`` (what a setting would name it by)."""
    return f"{cls.__module__}.{cls.__qualname__}"


class Pluggable(Generic[T]):
    """One kind of pluggable part (``what``, in words).

    ``setting`` names the default; every choice is a subclass of the class ``load_base``
    returns (imported on first use, so declaring a Pluggable imports no backend);
    ``aliases`` maps short names to dotted paths."""

    def __init__(
        self,
        setting: str,
        what: str,
        load_base: Callable[[], type[T]],
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        self.setting = setting
        self.what = what
        self.aliases = dict(aliases or {})
        self._load_base = load_base
        self._base: type[T] | None = None
        self._instances: dict[str, T] = {}
        _every.append(self)

    def __repr__(self) -> str:
        return f"<Pluggable {self.setting}>"

    @property
    def base(self) -> type[T]:
        base = self._base
        if base is None:
            base = self._base = self._load_base()
        return base

    def get(self, value: object = None) -> T:
        """The part ``value`` names (an instance, class, dotted path or alias), or the
        setting's when it is None: an instance as it is, else one made once and reused."""
        base = self._base or self.base
        if isinstance(value, base):
            return value
        configured = value is None
        if configured:
            value = getattr(idempotency_settings, self.setting)
            if isinstance(value, base):
                return value
        if isinstance(value, str):
            key = self.aliases.get(value, value)
        elif isinstance(value, type):
            key = class_path(value)
        else:
            key = ""  # no such key: resolve() says what is wrong with it
        try:
            return self._instances[key]
        except KeyError:
            pass
        instance = self.resolve(value, configured=configured)()
        self._instances[key] = instance
        return instance

    def resolve(self, value: object, *, configured: bool = False) -> type[T]:
        """The class ``value`` (a dotted path, alias or class) names; ``configured``:
        it is the setting's value (the error names the setting).

        Raises:
            UnusableBackend: It cannot be imported, is not a subclass of :attr:`base`,
                or leaves some of its abstract methods unimplemented.
        """
        base = self.base
        found: object = value
        if isinstance(value, str):
            try:
                found = import_string(self.aliases.get(value, value))
            except ImportError as exc:
                raise self._unusable(CANNOT_IMPORT, value, configured, error=exc) from exc
        if not isinstance(found, type) or not issubclass(found, base):
            shown = class_path(found) if isinstance(found, type) else type(found).__name__
            raise self._unusable(NOT_A_SUBCLASS, value, configured, found=shown)
        if inspect.isabstract(found):
            missing = ", ".join(sorted(getattr(found, "__abstractmethods__", ())))
            raise self._unusable(
                ABSTRACT, value, configured, found=class_path(found), methods=missing
            )
        return found

    def problem(self, value: object) -> UnusableBackend | None:
        """What is wrong with ``value`` as a choice of this part (None: nothing); an
        instance is taken as it is."""
        if isinstance(value, self.base):
            return None
        try:
            self.resolve(value, configured=True)
        except UnusableBackend as exc:
            return exc
        return None

    def names(self, value: object, cls: type) -> bool:
        """Whether ``value`` (as a setting holds it) names ``cls`` or a subclass of it."""
        if isinstance(value, self.base):
            return isinstance(value, cls)
        try:
            return issubclass(self.resolve(value), cls)
        except UnusableBackend:
            return False

    def _unusable(
        self, code: str, value: object, configured: bool, **details: Any
    ) -> UnusableBackend:
        aliases = ", ".join(f"{name!r}" for name in self.aliases) or "none"
        # imported here: idempotency.checks imports the stores, which import this module
        from idempotency.checks.messages import MESSAGES

        entry = MESSAGES[code]
        values = {
            "name": self.setting,
            "what": self.what,
            "where": f"IDEMPOTENCY[{self.setting!r}] = " if configured else "",
            "value": value,
            "base": class_path(self.base),
            "aliases": aliases,
            **details,
        }
        return UnusableBackend(code, entry.msg.format(**values), entry.hint.format(**values))


_every: list[Pluggable[Any]] = []


@on_reload
def _forget() -> None:
    for pluggable in _every:
        pluggable._instances.clear()
