"""The exceptions (idempotency.exceptions): one module, one naming scheme; they survive
pickling (a Celery task's failure) and the HTTP ones answer with their problem document."""

from __future__ import annotations

import json
import pickle
import re

import pytest

from idempotency import exceptions
from idempotency.exceptions import (
    ArgumentsMismatch,
    CallableMismatch,
    CallInProgress,
    IdempotencyError,
    LockNotAcquired,
    RequestInProgress,
    StaleOwner,
    StoreCorrupted,
    StoredError,
    StoreUnavailable,
    TaskDeferred,
)

CLASSES = [getattr(exceptions, name) for name in exceptions.__all__]


def test_every_exception_is_defined_in_the_module_and_named_by_one_scheme() -> None:
    """No alias, no re-export, and ``Idempotency`` only in the base's name: the module
    already says whose errors they are."""
    assert [cls.__name__ for cls in CLASSES] == exceptions.__all__
    assert {cls.__module__ for cls in CLASSES} == {"idempotency.exceptions"}
    assert [cls for cls in CLASSES if not issubclass(cls, Exception)] == []
    prefixed = [name for name in exceptions.__all__ if re.search("Idempotency|Idempotent", name)]
    assert prefixed == ["IdempotencyError"]


@pytest.mark.parametrize(
    "error",
    [
        CallInProgress("scope", "key"),
        TaskDeferred("scope", "key", "result-2", "2030-01-01T00:00:00+00:00"),
        CallableMismatch("scope", "key", "pay"),
        ArgumentsMismatch("scope", "key", "pay"),
        StoredError("orders.Error", "declined"),
        LockNotAcquired("nightly", 2.5),
        StaleOwner("scope", "key"),
        StoreUnavailable("down", retry_after=3),
        StoreCorrupted("unreadable"),
        RequestInProgress("busy", retry_after=4),
    ],
    ids=lambda e: type(e).__name__,
)
def test_each_survives_pickling_under_its_public_path(error: Exception) -> None:
    data = pickle.dumps(error)
    assert b"idempotency.exceptions" in data and b"idempotency.exceptions." not in data
    again = pickle.loads(data)
    assert type(again) is type(error) and str(again) == str(error)
    assert vars(again).keys() >= {k for k in vars(error) if k != "retry_after"}


def test_an_error_carries_what_drfs_api_exception_carries() -> None:
    """``detail`` is this occurrence's text (the default one when none is given), and
    ``str()`` of the error is that text, as DRF's ``APIException``."""
    error = RequestInProgress(retry_after=0)
    assert error.detail == str(RequestInProgress.default_detail) == str(error)
    assert (error.status_code, error.default_code) == (409, "idempotency-request-in-progress")
    assert error.retry_after == 1 and error.headers() == {"Retry-After": "1"}
    assert IdempotencyError("why", order=7).detail == "why"


@pytest.mark.parametrize(
    "cls", [c for c in CLASSES if issubclass(c, IdempotencyError)], ids=lambda c: c.__name__
)
def test_each_http_error_answers_its_problem(cls: type[IdempotencyError]) -> None:
    made = {CallableMismatch: ("s", "k", "pay"), ArgumentsMismatch: ("s", "k", "pay")}
    error = cls(*made.get(cls, ()))
    response = error.as_response()
    body = json.loads(response.content)
    assert response.status_code == cls.status_code
    assert response["Content-Type"] == "application/problem+json"
    assert body["code"] == cls.default_code and body["title"] == cls.title
    assert body["status"] == cls.status_code
    assert body["detail"] == error.detail


def test_extra_members_join_the_problem_document() -> None:
    response = IdempotencyError("no", order=7).as_response()
    assert json.loads(response.content)["order"] == 7
