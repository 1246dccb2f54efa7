"""How every pluggable part (stores, submit-token backends, lock backends) is chosen: an
alias in a settings dict, as Django's ``CACHES``, ``STORAGES`` and ``TASKS`` are.

``IDEMPOTENCY["STORES"]`` (and ``TOKENS``, ``LOCKS``) maps each alias to
``{"BACKEND": dotted path, "LOCATION": ..., "OPTIONS": {...}}``. A :class:`BackendHandler`
reads one such setting: ``handler["redis"]`` is the part the alias ``"redis"`` configures,
``handler.all()`` every configured one. The backend class is made with keyword arguments
only: ``Backend(location=LOCATION, **OPTIONS)`` when the entry has a ``LOCATION``, else
``Backend(**OPTIONS)``. Each alias is made once per process, shared by every thread (a
part keeps no per-call state), and made again after ``IDEMPOTENCY`` changes
(``override_settings`` included).

Each backend class says what it takes (:class:`Configurable`): the ``OPTIONS`` it accepts,
each described as a setting is (:class:`~idempotency.conf.Setting`), and the URL schemes
its ``LOCATION`` may have. An entry that asks for anything else raises
:class:`UnusableBackend` (an :class:`~django.core.exceptions.ImproperlyConfigured`) at
use, and the system checks report the same problem at startup, with the same words and
the id of :attr:`UnusableBackend.code`.
"""

from __future__ import annotations

import difflib
import inspect
import threading
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from idempotency.conf import Setting, idempotency_settings, on_reload

T = TypeVar("T")

#: The keys of one alias' entry.
ENTRY_KEYS = ("BACKEND", "LOCATION", "OPTIONS")

#: The alias used where none is named.
DEFAULT_ALIAS = "default"

#: The ``key_prefix`` option of every backend that writes keys (to Redis, a cache, named
#: locks): two projects sharing one server keep apart by it.
KEY_PREFIX = Setting("idem", "Prefix of every key this backend writes.", "text")


class Configurable:
    """What a backend class accepts in its alias' entry; every backend base class has it.

    A subclass declares :attr:`options` (its constructor's keyword arguments, each with its
    default, meaning and type) and, when it takes a ``LOCATION``, :attr:`location_schemes`;
    its constructor takes those keywords only (``location`` too where it has schemes)."""

    #: The ``OPTIONS`` this backend accepts, by name (its constructor's keywords).
    options: ClassVar[Mapping[str, Setting]] = {}
    #: The URL schemes its ``LOCATION`` may have (``"redis"`` for ``redis://...``); empty:
    #: it takes no ``LOCATION``.
    location_schemes: ClassVar[tuple[str, ...]] = ()


class CheckText(NamedTuple):
    """The words of one system check id, ``{placeholders}`` filled where it is raised."""

    msg: str
    hint: str


#: The words of what can be wrong with an alias' entry, by check id: raised at use as
#: :class:`UnusableBackend`, reported at startup by :mod:`idempotency.checks` (whose
#: ``MESSAGES`` holds them with every other id).
ENTRY_MESSAGES: dict[str, CheckText] = {
    "E044": CheckText(
        "{where} = {value!r} names no {what}: it cannot be imported ({error}).",
        "Name the dotted path of a subclass of {base}.",
    ),
    "E045": CheckText(
        "{where} = {value!r} names no {what}: {found} is not a subclass of {base}.",
        "Name the dotted path of a subclass of {base}.",
    ),
    "E046": CheckText(
        "{where} = {value!r} names no usable {what}: {found} does not implement {methods}.",
        "Implement every abstract method of {base} in {found} (the methods subclasses "
        "must implement come first in its documentation).",
    ),
    "E060": CheckText(
        "IDEMPOTENCY[{setting!r}] has no {what} {alias!r}.",
        "Add the alias to IDEMPOTENCY[{setting!r}] (a dict of aliases, each "
        "{{'BACKEND': ..., 'LOCATION': ..., 'OPTIONS': {{...}}}}, as CACHES), or name one of "
        "its aliases: {aliases}.",
    ),
    "E061": CheckText(
        "{where} is {value!r}{extra}; it must be a dict.",
        "Write each alias as CACHES does: {{'BACKEND': 'dotted.path.Class', 'LOCATION': ..., "
        "'OPTIONS': {{...}}}} (LOCATION and OPTIONS may be left out; OPTIONS is a dict).",
    ),
    "E062": CheckText(
        "{where} is {value!r}; for {backend} it must be {expected}.",
        "Redis stores, tokens and locks take redis://, rediss:// (TLS) or unix:// URLs "
        "(or, instead, OPTIONS {{'cache': <a CACHES alias>}}); other backends take none.",
    ),
    "E063": CheckText(
        "{where} has the option {name!r}, which {backend} does not accept.",
        "{suggestion}{backend} accepts: {accepted}.",
    ),
    "E064": CheckText(
        "{where} is {value!r}; it must be {expected}.",
        "{name}: {help}",
    ),
}


class UnusableBackend(ImproperlyConfigured):
    """An alias' entry (or a value naming an alias) cannot be used; ``code`` is the id of
    the system check that reports it, ``text`` and ``hint`` its words."""

    def __init__(self, code: str, **values: Any) -> None:
        entry = ENTRY_MESSAGES[code]
        self.code = code
        self.text = entry.msg.format(**values)
        self.hint = entry.hint.format(**values)
        super().__init__(f"{self.text} {self.hint}")


def class_path(cls: type) -> str:
    """The dotted path of ``cls`` (what a ``BACKEND`` would name it by)."""
    return f"{cls.__module__}.{cls.__qualname__}"


class BackendHandler(Generic[T]):
    """The parts one setting (``STORES``, ``TOKENS``, ``LOCKS``) configures, by alias.

    ``what`` names one part in words (``"store"``); every ``BACKEND`` is a subclass of the
    class ``load_base`` returns (imported on first use, so declaring a handler imports no
    backend)."""

    def __init__(self, setting: str, what: str, load_base: Callable[[], type[T]]) -> None:
        self.setting = setting
        self.what = what
        self._load_base = load_base
        self._base: type[T] | None = None
        self._instances: dict[str, T] = {}
        self._lock = threading.Lock()
        _every.append(self)

    def __repr__(self) -> str:
        return f"<BackendHandler {self.setting}>"

    @property
    def base(self) -> type[T]:
        base = self._base
        if base is None:
            base = self._base = self._load_base()
        return base

    @property
    def entries(self) -> Mapping[str, Any]:
        """The setting as configured: each alias' entry."""
        value = getattr(idempotency_settings, self.setting)
        return value if isinstance(value, Mapping) else {}

    def __getitem__(self, alias: str) -> T:
        """The part ``alias`` configures: made on first use, then the same instance.

        Raises:
            UnusableBackend: No such alias, or its entry cannot be used.
        """
        try:
            return self._instances[alias]
        except KeyError:
            pass
        with self._lock:  # one instance per alias, even when two threads ask at once
            instance = self._instances.get(alias)
            if instance is None:
                instance = self._instances[alias] = self.create(alias)
        return instance

    def __contains__(self, alias: object) -> bool:
        return alias in self.entries

    def all(self) -> list[T]:
        """Every configured part, in the setting's order."""
        return [self[alias] for alias in self.entries]

    def get(self, value: str | T | None = None) -> T:
        """The part ``value`` names: an instance as it is, an alias as :meth:`__getitem__`
        makes it, None the ``"default"`` alias'.

        Raises:
            UnusableBackend: ``value`` is no alias of the setting, or its entry cannot be
                used.
            TypeError: ``value`` is neither an alias nor an instance.
        """
        if value is None:
            return self[DEFAULT_ALIAS]
        if isinstance(value, str):
            return self[value]
        if isinstance(value, self.base):
            return value
        raise TypeError(self.type_error(value))

    def type_error(self, value: object) -> str:
        """Why ``value`` cannot name a part (neither an alias nor an instance)."""
        return (
            f"A {self.what} is an alias of IDEMPOTENCY[{self.setting!r}] or an instance of "
            f"{class_path(self.base)}, not {value!r}."
        )

    def create(self, alias: str) -> T:
        """A new part for ``alias``' entry (:meth:`__getitem__` keeps one per alias)."""
        entry = self.entry(alias)
        problems = self.problems(alias, entry)
        if problems:
            raise problems[0]
        cls = self.backend_class(alias)
        assert cls is not None  # noqa: S101 - no problem means a class
        options = dict(entry.get("OPTIONS") or {})
        if entry.get("LOCATION") is not None:
            options["location"] = entry["LOCATION"]
        return cls(**options)

    def entry(self, alias: str) -> Mapping[str, Any]:
        """``alias``' entry.

        Raises:
            UnusableBackend: The setting has no such alias (check ``idempotency.E013`` for
                a store a view names, ``E060`` for a missing ``"default"``).
        """
        entries = self.entries
        if alias not in entries:
            raise UnusableBackend(
                "E060",
                setting=self.setting,
                what=self.what,
                alias=alias,
                aliases=", ".join(repr(a) for a in entries) or "none",
            )
        entry: Mapping[str, Any] = entries[alias]
        return entry

    def backend_class(self, alias: str) -> type[T] | None:
        """The class ``alias``' ``BACKEND`` names, or None when it names no usable one
        (:meth:`problems` says why)."""
        entry = self.entries.get(alias)
        if not isinstance(entry, Mapping) or not isinstance(entry.get("BACKEND"), str):
            return None
        try:
            found = import_string(entry["BACKEND"])
        except ImportError:
            return None
        if isinstance(found, type) and issubclass(found, self.base):
            return found
        return None

    def problems(self, alias: str, entry: object) -> list[UnusableBackend]:
        """What is wrong with ``entry`` as ``alias``' entry: its shape, its ``BACKEND``,
        ``LOCATION`` and ``OPTIONS`` (empty: nothing)."""
        where = f"IDEMPOTENCY[{self.setting!r}][{alias!r}]"
        if not isinstance(entry, Mapping) or set(entry) - set(ENTRY_KEYS):
            extra = (
                sorted(map(str, set(entry) - set(ENTRY_KEYS))) if isinstance(entry, Mapping) else []
            )
            return [
                UnusableBackend(
                    "E061",
                    where=where,
                    value=entry,
                    extra=f" (unknown keys: {', '.join(extra)})" if extra else "",
                )
            ]
        found = self._backend_problem(where, entry.get("BACKEND"))
        if isinstance(found, UnusableBackend):
            return [found]
        return self._location_problems(where, found, entry.get("LOCATION")) + self._option_problems(
            where, found, entry.get("OPTIONS")
        )

    def _backend_problem(self, where: str, value: object) -> type[Any] | UnusableBackend:
        values = {"where": f"{where}['BACKEND']", "value": value, "what": self.what}
        base = class_path(self.base)
        try:
            if not isinstance(value, str):
                raise ImportError("BACKEND must be a dotted path")
            found = import_string(value)
        except ImportError as exc:
            return UnusableBackend("E044", **values, error=exc, base=base)
        if not isinstance(found, type) or not issubclass(found, self.base):
            shown = class_path(found) if isinstance(found, type) else type(found).__name__
            return UnusableBackend("E045", **values, found=shown, base=base)
        if inspect.isabstract(found):
            missing = ", ".join(sorted(getattr(found, "__abstractmethods__", ())))
            return UnusableBackend(
                "E046", **values, found=class_path(found), methods=missing, base=base
            )
        return found

    @staticmethod
    def _location_problems(where: str, cls: type[Any], location: object) -> list[UnusableBackend]:
        if location is None:
            return []
        schemes: tuple[str, ...] = getattr(cls, "location_schemes", ())
        scheme = location.partition("://")[0].lower() if isinstance(location, str) else ""
        if isinstance(location, str) and "://" in location and scheme in schemes:
            return []
        if schemes:
            expected = "a URL whose scheme is " + " or ".join(f"{s}://" for s in schemes)
        else:
            expected = "absent: this backend takes no LOCATION"
        return [
            UnusableBackend(
                "E062",
                where=f"{where}['LOCATION']",
                value=location,
                backend=cls.__qualname__,
                expected=expected,
            )
        ]

    @staticmethod
    def _option_problems(where: str, cls: type[Any], options: object) -> list[UnusableBackend]:
        if options is None:
            return []
        accepted: Mapping[str, Setting] = getattr(cls, "options", {})
        names = ", ".join(sorted(accepted)) or "none"
        if not isinstance(options, Mapping):
            return [UnusableBackend("E061", where=f"{where}['OPTIONS']", value=options, extra="")]
        problems = []
        for name, value in options.items():
            option = accepted.get(name)
            if option is None:
                close = difflib.get_close_matches(str(name), list(accepted), n=1)
                problems.append(
                    UnusableBackend(
                        "E063",
                        where=f"{where}['OPTIONS']",
                        name=name,
                        backend=cls.__qualname__,
                        suggestion=f"Did you mean {close[0]!r}? " if close else "",
                        accepted=names,
                    )
                )
            elif not option.accepts(value):
                problems.append(
                    UnusableBackend(
                        "E064",
                        where=f"{where}['OPTIONS'][{name!r}]",
                        value=value,
                        expected=option.expected,
                        name=name,
                        help=option.help,
                    )
                )
        return problems


_every: list[BackendHandler[Any]] = []


@on_reload
def _forget() -> None:
    for handler in _every:
        with handler._lock:
            handler._instances.clear()
