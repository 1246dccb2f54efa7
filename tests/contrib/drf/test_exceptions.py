"""The library's errors in DRF views (idempotency.contrib.drf.exceptions): the handler
answers them as their problems, and APIError carries one through any DRF handler."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from idempotency.contrib.drf.exceptions import APIError, exception_handler
from idempotency.exceptions import (
    IdempotencyError,
    RequestInProgress,
    StoreUnavailable,
    SubmitTokenUsed,
)
from tests.testapp.models import Effect

Handler = Callable[[Exception, dict[str, Any]], Any]


def answer(raised: Exception, handler: Handler, *, write: bool = False) -> Any:
    """What a DRF view whose POST raises ``raised`` answers under ``handler``."""

    class Raising(APIView):
        authentication_classes: list[Any] = []
        permission_classes: list[Any] = []

        def get_exception_handler(self) -> Handler:
            return handler

        def post(self, request: Request) -> Response:
            if write:
                Effect.objects.create(label="written before the error")
            raise raised

    response = Raising.as_view()(APIRequestFactory().post("/", {}, format="json"))
    if isinstance(response, Response):
        response.render()
    return response


def test_the_handler_answers_a_raised_error_with_its_problem() -> None:
    response = answer(RequestInProgress(retry_after=3), exception_handler)
    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    assert response["Retry-After"] == "3"
    assert json.loads(response.content)["code"] == "idempotency-request-in-progress"


def test_the_handler_answers_an_api_error_with_the_problem_it_carries() -> None:
    response = answer(APIError(SubmitTokenUsed()), exception_handler)
    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content)["code"] == "submit-token-used"


def test_the_handler_leaves_drfs_own_errors_to_drf() -> None:
    response = answer(exceptions.NotFound(), exception_handler)
    assert response.status_code == 404
    assert json.loads(response.content) == {"detail": "Not found."}


def test_drfs_default_handler_renders_an_api_error_with_status_code_and_retry_after() -> None:
    """A project that keeps DRF's default handler: an ``APIError`` (what
    ``SubmitTokenPermission`` raises) answers its status, detail and ``Retry-After``,
    never a 500; a raw error is left to Django, as DRF leaves any foreign exception."""
    error = StoreUnavailable("down", retry_after=2)
    response = answer(APIError(error), drf_exception_handler)
    assert response.status_code == 503 and response["Retry-After"] == "2"
    assert json.loads(response.content) == {"detail": "down"}
    wrapped = APIError(error)
    assert (wrapped.get_codes(), wrapped.title) == (error.default_code, error.title)
    with pytest.raises(StoreUnavailable):
        answer(error, drf_exception_handler)


@pytest.mark.django_db(transaction=True)
def test_the_handler_rolls_the_views_transaction_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """As DRF's handler does for its own errors under ``ATOMIC_REQUESTS``: what the view
    wrote before raising is not committed with the error's answer."""
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    with transaction.atomic():  # the request's transaction
        response = answer(IdempotencyError("refused"), exception_handler, write=True)
    assert response.status_code == 400
    assert Effect.objects.count() == 0
