"""The app (idempotency/contrib/ninja/apps.py): ``ready()`` registers Django Ninja with
the HTTP interfaces, once however often it runs, so that ``@idempotent`` leaves Ninja the
hook it calls when it builds an operation, and refuses an operation Ninja built already."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.http import HttpRequest, HttpResponse

from idempotency import idempotent
from idempotency.contrib.ninja import DjangoNinja, contribute
from idempotency.exceptions import ImproperlyApplied
from idempotency.http import views


def registered() -> int:
    return sum(isinstance(framework, DjangoNinja) for framework in views._registered)


def test_ready_registers_ninja_once() -> None:
    assert registered() == 1
    apps.get_app_config("idempotency_ninja").ready()
    assert registered() == 1


def operation(request: HttpRequest) -> HttpResponse:
    return HttpResponse(status=201)


def test_idempotent_leaves_ninja_its_hook_once_per_function() -> None:
    wrapped: Any = idempotent(operation)
    assert wrapped._ninja_contribute_to_operation == [contribute]


def test_idempotent_refuses_an_operation_ninja_already_built() -> None:
    def built(request: HttpRequest) -> HttpResponse:
        return HttpResponse()

    built._ninja_operation = object()  # type: ignore[attr-defined]  # as Ninja marks it
    with pytest.raises(ImproperlyApplied, match="after Django Ninja built its operation"):
        idempotent(built)
