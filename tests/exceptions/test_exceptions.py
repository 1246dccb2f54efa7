"""The exceptions (idempotency.exceptions): one path each, whichever module of the package
defines them; they survive pickling (a Celery task's failure) and the HTTP ones answer
with their problem document."""

from __future__ import annotations

import json
import pickle

import pytest

import idempotency
from idempotency import exceptions
from idempotency.exceptions import (
    ArgumentsMismatch,
    FunctionKeyMismatch,
    IdempotencyError,
    InProgress,
    LockNotAcquired,
    StaleOwner,
    StoreCorrupted,
    StoredError,
    StoreUnavailable,
)

CLASSES = [getattr(exceptions, name) for name in exceptions.__all__]


def test_every_exception_is_named_idempotency_exceptions_whatever_defines_it() -> None:
    assert {cls.__module__ for cls in CLASSES} == {"idempotency.exceptions"}
    assert all(getattr(idempotency, cls.__name__) is cls for cls in CLASSES)
    assert [cls for cls in CLASSES if not issubclass(cls, Exception)] == []


@pytest.mark.parametrize(
    "error",
    [
        InProgress("scope", "key"),
        FunctionKeyMismatch("scope", "key", "pay"),
        ArgumentsMismatch("scope", "key", "pay"),
        StoredError("orders.Error", "declined"),
        LockNotAcquired("nightly", 2.5),
        StaleOwner("scope", "key"),
        StoreUnavailable("down", retry_after=3),
        StoreCorrupted("unreadable"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_each_survives_pickling_under_its_public_path(error: Exception) -> None:
    data = pickle.dumps(error)
    assert b"idempotency.exceptions" in data and b"idempotency.exceptions." not in data
    again = pickle.loads(data)
    assert type(again) is type(error) and str(again) == str(error)


@pytest.mark.parametrize(
    "cls", [c for c in CLASSES if issubclass(c, IdempotencyError)], ids=lambda c: c.__name__
)
def test_each_http_error_answers_its_problem(cls: type[IdempotencyError]) -> None:
    made = {FunctionKeyMismatch: ("s", "k", "pay"), ArgumentsMismatch: ("s", "k", "pay")}
    error = cls(*made.get(cls, ()))
    response = error.as_response()
    body = json.loads(response.content)
    assert response.status_code == cls.status_code
    assert response["Content-Type"] == "application/problem+json"
    assert body["code"] == cls.default_code and body["title"] == cls.title
    assert body["status"] == cls.status_code
