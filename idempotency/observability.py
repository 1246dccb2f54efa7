"""What the library tells operators, beside its signals: structured logs, and the
engine's hook for tracing.

**Logs**: one record per non-trivial outcome, on ``idempotency.outcomes``. Replays,
conflicts, mismatches, releases, stale owners, reused submit tokens, locks not acquired
and unreachable stores each log one record whose ``extra`` fields are ``outcome``,
``scope_hash`` and ``key_hash`` (see :func:`key_hash`), ``route`` (the URL pattern),
``store`` and ``claim_seconds``, plus ``status`` or ``error`` (an exception's class name)
where they apply. Request and response bodies, tokens, raw keys and raw scopes are never
logged: every log line of the library names a record by these keyed hashes
(:func:`idempotency.utils.hashing.log_ref`). Turn it off with
``IDEMPOTENCY = {"LOG_OUTCOMES": False}`` or with the logger's level.
:class:`JsonFormatter` renders records as one JSON object per line with nothing but the
standard ``logging`` configuration (see docs/howto/production.md).

**Tracing**: :func:`spanned` runs one step of a keyed request or call (a store call, a
replay) inside the span of the tracer an integration registered with :func:`register`
(:mod:`idempotency.contrib.otel` does, in its ``ready()``), when
``IDEMPOTENCY["OPENTELEMETRY"]`` is on; plainly otherwise. The engine imports this hook,
never the integration.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from idempotency import signals
from idempotency.conf import idempotency_settings
from idempotency.utils.hashing import log_hash

T = TypeVar("T")

logger = logging.getLogger("idempotency.outcomes")

#: Outcomes that are logged, and at which level ("stored" and "invalid_key" are routine).
LEVELS: dict[str, int] = {
    "replayed": logging.INFO,
    "conflict": logging.INFO,
    "mismatch": logging.WARNING,
    "released": logging.INFO,
    "stale_owner": logging.WARNING,
    "token_used": logging.INFO,
    "lock_not_acquired": logging.WARNING,
    "store_unavailable": logging.ERROR,
    "record_forged": logging.ERROR,
}

_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def key_hash(key: str) -> str:
    """A key (or a scope) as it appears in logs: 16 hex digits of its HMAC-SHA256 under
    a secret derived from ``SECRET_KEY``, so a log gives no oracle on a guessable key.

    To find a key's records, search for ``key_hash("the-key")`` (in ``manage.py shell``);
    a free-text line names a record as ``key_hash(scope)/key_hash(key)``.
    """
    return log_hash(key)


def store_name(sender: Any, kwargs: dict[str, Any]) -> str:
    """The label of the store behind a signal: its class name, or ``"-"``."""
    name = kwargs.get("store")
    if isinstance(name, str):
        return name
    return sender.__name__ if isinstance(sender, type) else "-"


def fields(outcome: str, sender: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The ``extra`` fields of one outcome: identifiers and numbers, never content."""
    key, scope = kwargs.get("key"), kwargs.get("scope")
    extra: dict[str, Any] = {
        "outcome": outcome,
        "scope_hash": key_hash(scope) if isinstance(scope, str) else None,
        "key_hash": key_hash(key) if isinstance(key, str) else None,
        "route": kwargs.get("route") or "-",
        "store": store_name(sender, kwargs),
        "claim_seconds": kwargs.get("claim_seconds"),
    }
    if isinstance(kwargs.get("status"), int):
        extra["status"] = kwargs["status"]
    exception = kwargs.get("exception")
    if isinstance(exception, BaseException):
        extra["error"] = type(exception).__name__
    if isinstance(kwargs.get("name"), str):
        extra["lock"] = kwargs["name"]
    if isinstance(kwargs.get("purpose"), str):
        extra["purpose"] = kwargs["purpose"]
    return extra


def _logging(level: int) -> Callable[[], bool]:
    """Whether records of ``level`` are logged now (``LOG_OUTCOMES`` and the logger's level)."""

    def logging_now() -> bool:
        return bool(idempotency_settings.LOG_OUTCOMES) and logger.isEnabledFor(level)

    return logging_now


#: Outcome -> whether its record is logged now: the receiver's test, and signals.heard()'s.
_LOGGING = {outcome: _logging(level) for outcome, level in LEVELS.items()}


def _receiver(outcome: str, level: int) -> Callable[..., None]:
    logging_now = _LOGGING[outcome]

    def receive(sender: Any, **kwargs: Any) -> None:
        if not logging_now():
            return
        extra = fields(outcome, sender, kwargs)
        logger.log(
            level,
            "idempotency %s: scope_hash=%s key_hash=%s route=%s store=%s",
            outcome,
            extra["scope_hash"],
            extra["key_hash"],
            extra["route"],
            extra["store"],
            extra=extra,
        )

    return receive


_RECEIVERS = {outcome: _receiver(outcome, level) for outcome, level in LEVELS.items()}


def connect() -> None:
    """Connect the log receivers (done by the app's ``ready()``)."""
    for outcome, receive in _RECEIVERS.items():
        uid = f"idempotency.observability.{outcome}"
        signals.OUTCOMES[outcome].connect(receive, dispatch_uid=uid)
        signals.log_receiver(signals.OUTCOMES[outcome], uid, _LOGGING[outcome])


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and every ``extra`` field."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in record.__dict__.items():
            if name not in _RESERVED and not name.startswith("_"):
                data[name] = value
        if record.exc_info:
            data["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


# -- tracing ---------------------------------------------------------------------------


class Keyed(Protocol):
    """What a span says of the request or call it belongs to (never its scope or key)."""

    @property
    def store(self) -> Any: ...

    @property
    def key(self) -> str: ...

    @property
    def mode(self) -> str: ...

    @property
    def scope_kind(self) -> str:
        """A bounded label of whose keys these are: ``user``, ``shared``, ``custom``, ..."""

    @property
    def interface(self) -> str:
        """``http``, ``function`` or ``task``."""


#: ``spans(name, owner, operation)``: a block around one step that yields the function
#: the step's result is handed to (it records the outcome and returns the result).
Spans = Callable[[str, Keyed, str], AbstractContextManager[Callable[[Any], Any]]]

_spans: list[Spans] = []


def register(spans: Spans) -> None:
    """Make ``spans`` the tracer of every step (the last one registered wins)."""
    _spans[:] = [spans]


@contextmanager
def spanned(name: str, owner: Keyed, operation: str) -> Iterator[Callable[[T], T]]:
    """The span ``idempotency.<name>`` of one step whose store method is ``operation``,
    from the registered tracer, when tracing is on; else a block whose recorder returns
    what it is given."""
    if not idempotency_settings.OPENTELEMETRY or not _spans:
        yield _as_is
        return
    with _spans[0](name, owner, operation) as done:
        yield done


def _as_is(result: T) -> T:
    return result


__all__ = [
    "JsonFormatter",
    "Keyed",
    "Spans",
    "connect",
    "fields",
    "key_hash",
    "register",
    "spanned",
]
