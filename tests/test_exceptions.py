"""The exceptions (idempotency.exceptions): one module, one naming scheme; they survive
pickling (a Celery task's failure) and the HTTP ones answer with their problem document.
RFC 9457 problem details themselves: the document's members, its ``type`` under
``PROBLEM_TYPE_BASE``, compact ASCII JSON as DRF renders it, and a response ready to
return with its headers."""

from __future__ import annotations

import json
import pickle
import re

import pytest
from django.test import override_settings

from idempotency import exceptions
from idempotency.exceptions import (
    PROBLEM_CONTENT_TYPE,
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
    problem_body,
    problem_response,
    render_problem,
)

#: What the module exports besides its exceptions: how they are told as problems.
PROBLEM_NAMES = ["PROBLEM_CONTENT_TYPE", "problem_body", "problem_response", "render_problem"]
CLASSES = [getattr(exceptions, name) for name in exceptions.__all__ if name not in PROBLEM_NAMES]


def test_every_exception_is_defined_in_the_module_and_named_by_one_scheme() -> None:
    """No alias, no re-export, and ``Idempotency`` only in the base's name: the module
    already says whose errors they are."""
    assert [name for name in exceptions.__all__ if name in PROBLEM_NAMES] == PROBLEM_NAMES
    assert [cls.__name__ for cls in CLASSES] == [
        name for name in exceptions.__all__ if name not in PROBLEM_NAMES
    ]
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


# -- problem details ------------------------------------------------------------------------


def test_a_problem_response_carries_the_document_and_its_headers() -> None:
    response = problem_response(
        409,
        "idempotency-request-in-progress",
        "Request in progress",
        "A request with this key is still running.",
        headers={"Retry-After": "2"},
        wait=2,
    )
    assert response.status_code == 409
    assert response["Content-Type"] == PROBLEM_CONTENT_TYPE == "application/problem+json"
    assert response["Retry-After"] == "2"
    document = json.loads(response.content)
    assert document == {
        "type": document["type"],
        "title": "Request in progress",
        "status": 409,
        "detail": "A request with this key is still running.",
        "code": "idempotency-request-in-progress",
        "wait": 2,
    }
    assert document["type"].endswith("idempotency-request-in-progress")


def test_the_type_is_the_configured_base_and_the_code() -> None:
    with override_settings(IDEMPOTENCY={"PROBLEM_TYPE_BASE": "https://errors.example.com/"}):
        body = problem_body(422, "idempotency-key-mismatch", "Key mismatch", "Another body.")
    assert body["type"] == "https://errors.example.com/idempotency-key-mismatch"


def test_the_json_is_compact_and_ascii_as_drf_renders_it() -> None:
    rendered = render_problem({"detail": "clé déjà utilisée", "status": 422})
    assert rendered == b'{"detail":"cl\\u00e9 d\\u00e9j\\u00e0 utilis\\u00e9e","status":422}'
    assert json.loads(rendered)["detail"] == "clé déjà utilisée"
