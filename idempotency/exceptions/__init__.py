"""Exceptions of django-idempotency, with stable names and codes.

The HTTP errors subclass DRF's ``APIException`` (``status_code``,
``default_detail``, ``default_code``) so they can be raised and caught like
any DRF error; the library itself renders them as RFC 9457 problem details.

They are defined by concern (:mod:`~idempotency.exceptions.requests`: the 4xx answers
to a keyed request; :mod:`~idempotency.exceptions.stores`: a store that cannot serve;
:mod:`~idempotency.exceptions.calls`: keyed functions and tasks;
:mod:`~idempotency.exceptions.usage`: misuse, locks, stale owners) and all named here:
``idempotency.exceptions.<Name>`` is each one's only path, the one pickles (Celery's
results) and stored errors record.
"""

from __future__ import annotations

from idempotency.exceptions.calls import (
    ArgumentsMismatch,
    FunctionKeyMismatch,
    IdempotencyKeyMissing,
    InProgress,
    StoredError,
    TaskDeferred,
)
from idempotency.exceptions.requests import (
    IdempotencyAnonymousNotAllowed,
    IdempotencyError,
    IdempotencyKeyMismatch,
    IdempotencyKeyRequired,
    IdempotencyRequestInProgress,
    IdempotencyResponseNotStored,
    IdempotencyTooManyRecords,
    InvalidIdempotencyKey,
    SubmitTokenInvalid,
    SubmitTokenUsed,
)
from idempotency.exceptions.stores import (
    RecordForged,
    StoreCorrupted,
    StoreMisconfigured,
    StoreNotDurable,
    StoreUnavailable,
)
from idempotency.exceptions.usage import ImproperlyApplied, LockNotAcquired, StaleOwner

__all__ = [
    "ArgumentsMismatch",
    "FunctionKeyMismatch",
    "IdempotencyAnonymousNotAllowed",
    "IdempotencyError",
    "IdempotencyKeyMismatch",
    "IdempotencyKeyMissing",
    "IdempotencyKeyRequired",
    "IdempotencyRequestInProgress",
    "IdempotencyResponseNotStored",
    "IdempotencyTooManyRecords",
    "ImproperlyApplied",
    "InProgress",
    "InvalidIdempotencyKey",
    "LockNotAcquired",
    "RecordForged",
    "StaleOwner",
    "StoreCorrupted",
    "StoreMisconfigured",
    "StoreNotDurable",
    "StoreUnavailable",
    "StoredError",
    "SubmitTokenInvalid",
    "SubmitTokenUsed",
    "TaskDeferred",
]

# Every class is named ``idempotency.exceptions.<Name>``, wherever it is defined: pickles
# (a Celery task's failure), stored errors (``store_errors=True`` records the dotted
# type) and tracebacks keep the path they had when this was one module.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
