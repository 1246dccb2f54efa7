"""``IdempotentMixin`` and ``DjangoRestFramework`` (idempotency.contrib.drf.mixins): class
attributes over the view's policy, the actions that take part, a keyed POST run once and
replayed, and what the framework hook answers about DRF views and requests."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from idempotency.contrib.drf.mixins import DjangoRestFramework, IdempotentMixin, view_of
from idempotency.http.options import Policy
from tests.support.http import new_key
from tests.support.users import make_user


def fingerprint(request: Any, headers: Any) -> str:
    return "same"


class Counted(IdempotentMixin, APIView):
    """A view that counts its runs and answers their number."""

    permission_classes = ()
    runs = 0
    idempotency_ttl = 5
    idempotency_fingerprint = staticmethod(fingerprint)

    def post(self, request: Request) -> Response:
        type(self).runs += 1
        return Response({"run": type(self).runs}, status=201)

    def get(self, request: Request) -> Response:
        return Response({"view": view_of(request) is self})


class OnlyPut(Counted):
    idempotent_actions = ("put",)


def test_class_attributes_override_the_policy_and_the_scope_is_the_views_hook() -> None:
    view = Counted()
    policy = view.get_idempotency_policy()
    assert policy.ttl == 5
    assert policy.fingerprint is fingerprint
    assert policy.scope == view.get_idempotency_scope
    assert policy.lease is None  # no attribute: the setting applies
    assert "on_replay" not in vars(policy) or policy.on_replay is None


def test_the_class_policy_is_the_base_the_attributes_override() -> None:
    view = type("Based", (Counted,), {"idempotency_policy": Policy(ttl=9, lease=7)})()
    policy = view.get_idempotency_policy()
    assert (policy.ttl, policy.lease) == (5, 7)


def test_idempotent_actions_limit_the_methods_that_take_part() -> None:
    factory = APIRequestFactory()
    post, put = Request(factory.post("/")), Request(factory.put("/"))
    assert OnlyPut().is_idempotent_action(put)
    assert not OnlyPut().is_idempotent_action(post)
    assert Counted().is_idempotent_action(post)


@pytest.mark.django_db(transaction=True)
def test_a_keyed_post_runs_once_and_its_retry_replays() -> None:
    Counted.runs = 0
    user = make_user("mixin")
    view = Counted.as_view()
    factory = APIRequestFactory()
    key = new_key()
    answers = []
    for _ in range(2):
        request = factory.post("/", {"amount": 5}, format="json", HTTP_IDEMPOTENCY_KEY=key)
        force_authenticate(request, user=user)
        answers.append(view(request))
    assert Counted.runs == 1
    assert [a.status_code for a in answers] == [201, 201]
    assert answers[0].content == answers[1].content == b'{"run":1}'
    request = factory.post("/", {"amount": 5}, format="json")  # no key: runs
    force_authenticate(request, user=user)
    assert view(request).status_code == 201
    assert Counted.runs == 2


def test_view_of_finds_the_drf_view_of_a_request() -> None:
    response = Counted.as_view()(APIRequestFactory().get("/"))
    assert response.data == {"view": True}
    assert view_of(APIRequestFactory().get("/")) is None  # a Django request has none


def test_the_framework_serves_api_views_only() -> None:
    drf = DjangoRestFramework()
    policy = Policy(ttl=3)
    made = drf.view_class(APIView, policy)
    assert made is not None and issubclass(made, IdempotentMixin)
    assert made.idempotency_policy is policy and made.__name__ == "APIView"
    assert drf.view_class(object, policy) is None
    assert drf.owns(Counted) and not drf.owns(object)
    assert drf.handles_keys(Counted) and not drf.handles_keys(APIView)
    policy_of_class = drf.class_policy(Counted, callback=None)
    assert policy_of_class is not None and policy_of_class.ttl == 5
    assert drf.class_policy(APIView, callback=None) is None


def test_parsed_data_is_what_a_drf_request_parsed_and_nothing_before() -> None:
    drf = DjangoRestFramework()
    request = Request(APIRequestFactory().post("/", {"a": 1}, format="json"))
    request.parsers = APIView().get_parsers()
    assert drf.parsed_data(request) is None
    assert request.data == {"a": 1}
    found = drf.parsed_data(request)
    assert found is not None and found[0] == {"a": 1}
    assert drf.parsed_data(APIRequestFactory().post("/")) is None
