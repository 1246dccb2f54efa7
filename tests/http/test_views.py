"""The views the HTTP interfaces serve (idempotency/http/views.py): the frameworks that
register, and the mark ``@idempotent`` leaves. (The protected views of a URLconf:
tests/test_checks.py; the access decorators a replay would skip:
tests/http/test_middleware.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from idempotency import idempotent
from idempotency.exceptions import ImproperlyApplied
from idempotency.http import views
from idempotency.http.options import Policy

rf = RequestFactory()


@idempotent(ttl=60)
def keyed(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


def plain(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


class Wrapped:
    """A request class of a framework other than Django."""


class Toy(views.Framework):
    request_types = (Wrapped,)

    def __init__(self, data: Any = None) -> None:
        self.data = data

    def parsed_data(self, request: Any) -> tuple[Any, Any] | None:
        return None if self.data is None else (self.data, None)


@pytest.fixture
def registry() -> Iterator[None]:
    """The frameworks registered now, put back after the test."""
    saved, types = list(views._registered), views._request_types[0]
    yield
    views._registered[:] = saved
    views._request_types[0] = types


def test_a_registered_framework_answers_and_registering_its_class_again_replaces_it(
    registry: None,
) -> None:
    views.register(Toy({"a": 1}))
    views.register(Toy({"b": 2}))
    assert views.parsed_data(object()) == ({"b": 2}, None)
    assert sum(isinstance(f, Toy) for f in views._registered) == 1
    _view, request = views.split_view_args((Wrapped(),), decorator="@idempotent")
    assert isinstance(request, Wrapped)


def test_split_view_args_finds_the_request_of_a_function_or_a_method() -> None:
    request = rf.post("/")
    assert views.split_view_args((request,), decorator="@x") == (None, request)
    owner = object()
    assert views.split_view_args((owner, request), decorator="@x") == (owner, request)
    with pytest.raises(ImproperlyApplied, match="@x decorates views"):
        views.split_view_args(("not a request",), decorator="@x")


def test_policy_of_reads_the_mark_of_a_function_or_a_bound_method() -> None:
    policy = views.policy_of(keyed)
    assert isinstance(policy, Policy) and policy.ttl == 60
    assert views.policy_of(plain) is None

    class View:
        post = keyed

    assert views.policy_of(View().post) is policy


def test_functions_of_a_handler_include_what_it_closes_over() -> None:
    view = keyed  # as @api_view's handler closes over the function it calls

    def handler(*args: Any) -> Any:
        return view(*args)

    assert list(views.functions_of(handler)) == [handler, keyed]
    assert list(views.handler_policies(handler)) == [views.policy_of(keyed)]
