"""A watch on every log record of the library for the raw keys and scopes it handled
(issue 36, finding 11: logs carry keyed hashes, never keys or scopes).

:func:`install` wraps each store's ``claim`` and ``lookup`` (every keyed call, view and
task begins with one of them) so the watch learns the keys and scopes of the running
test, and puts a handler on the ``idempotency`` logger (every ``idempotency.*`` logger
propagates to it) at DEBUG. Each record's message, arguments, ``extra`` fields and
formatted exception are searched for those values; a hit is a leak, and the test that
logged it fails (``tests/conftest.py``). The storms and contract tests use recognisable
keys (e-mail addresses, card-like numbers, uuids), so a regression is caught there.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any

#: Keys and scopes shorter than this are too generic to search for ("k", "tasks").
MIN_LENGTH = 8
#: Scopes the library names itself (the default scope of functions and tasks).
GENERIC = frozenset({"functions", "tasks"})
_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class LeakWatch(logging.Handler):
    """The values to look for (this test's keys and scopes) and the leaks found."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.values: set[str] = set()
        self.leaks: list[str] = []
        self.records = 0
        self._guard = threading.Lock()

    def note(self, scope: Any, key: Any) -> None:
        with self._guard:
            for value in (scope, key):
                if isinstance(value, str) and len(value) >= MIN_LENGTH and value not in GENERIC:
                    self.values.add(value)

    def reset(self) -> list[str]:
        """Forget this test's values; the leaks found, emptied."""
        with self._guard:
            leaks, self.leaks = self.leaks, []
            self.values = set()
        return leaks

    def emit(self, record: logging.LogRecord) -> None:
        self.records += 1
        with self._guard:
            values = list(self.values)
        if not values:
            return
        text = self.text_of(record)
        for value in values:
            if value in text:
                with self._guard:
                    self.leaks.append(f"{record.name} {record.levelname}: {value!r} in {text!r}")

    def text_of(self, record: logging.LogRecord) -> str:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record whose arguments do not format
            message = f"{record.msg} {record.args!r}"
        extras = [repr(value) for name, value in record.__dict__.items() if name not in _RESERVED]
        parts = [message, repr(record.args), *extras]
        if record.exc_info and record.exc_info[1] is not None:
            parts.append(str(record.exc_info[1]))
        return "\n".join(parts)


WATCH = LeakWatch()


def _noting(method: Any) -> Any:
    @functools.wraps(method)
    def wrapper(self: Any, scope: Any, key: Any, *args: Any, **kwargs: Any) -> Any:
        WATCH.note(scope, key)
        return method(self, scope, key, *args, **kwargs)

    wrapper.__leak_watch__ = True  # type: ignore[attr-defined]
    return wrapper


def install() -> LeakWatch:
    """Wrap the stores' entry points and attach the handler (once per process)."""
    from idempotency.stores.cache import CacheStore
    from idempotency.stores.database import DatabaseStore
    from idempotency.stores.redis import RedisStore

    for cls in (DatabaseStore, RedisStore, CacheStore):
        for name in ("claim", "lookup"):
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, "__leak_watch__", False):
                setattr(cls, name, _noting(method))
    logger = logging.getLogger("idempotency")
    if WATCH not in logger.handlers:
        threshold = logger.getEffectiveLevel()
        logger.addHandler(WATCH)
        logger.setLevel(logging.DEBUG)
        # the console sees what it saw before: only the watch (and caplog) sees the rest
        quiet = _Below(threshold)
        for handler in logging.getLogger().handlers:
            if not type(handler).__module__.startswith("_pytest"):  # caplog keeps all
                handler.addFilter(quiet)
    return WATCH


class _Below(logging.Filter):
    """Drops the library's records below the level its logger had before the watch."""

    def __init__(self, threshold: int) -> None:
        super().__init__()
        self.threshold = threshold

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.threshold or not record.name.startswith("idempotency")
