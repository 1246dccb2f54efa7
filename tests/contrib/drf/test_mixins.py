"""``idempotency/contrib/drf/mixins.py``: ``IdempotentMixin`` handles a DRF view's key
after authentication, permissions and throttles, for the unsafe actions it names, with the
options its class attributes (or ``get_*`` hooks) give; ``DjangoRestFramework`` tells
``@idempotent`` and the middleware how DRF's views are built, answered and rendered."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.http import HttpRequest, HttpResponse
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from idempotency.contrib.drf.mixins import DjangoRestFramework, IdempotentMixin, hooks, view_of
from idempotency.http.options import Policy
from idempotency.models import IdempotencyRecord
from tests.support.counting import Counter
from tests.support.http import new_key
from tests.support.problems import problem

pytestmark = pytest.mark.django_db

RUNS = Counter()


def by_tenant(request: HttpRequest) -> str:
    return "tenant-1"


class Charges(IdempotentMixin, APIView):
    permission_classes = [IsAuthenticated]
    idempotent_actions = ["post", "put"]

    def post(self, request: Request) -> Response:
        return Response({"charge": RUNS()}, status=201)

    def put(self, request: Request) -> Response:
        raise ValidationError({"amount": ["required"]})

    def patch(self, request: Request) -> Response:
        return Response({"patched": RUNS()})


class Configured(Charges):
    idempotency_required = True
    idempotency_ttl = 60.0
    idempotency_redact = ["card"]
    idempotency_fingerprint = staticmethod(lambda request, headers: "same")

    def get_idempotency_scope(self, request: HttpRequest) -> str | None:
        return by_tenant(request)

    def on_replay(self, request: Any, response: HttpResponse, record: Any) -> None:
        response["X-Replayed-At"] = "now"


def charge(view: Any, method: str = "post", key: str | None = None, user: Any = None,
         **data: Any) -> Any:  # fmt: skip
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    request = getattr(APIRequestFactory(), method)("/charges/", data, format="json", **headers)
    if user is not None:
        force_authenticate(request, user=user)
    return view(request)


def test_a_keyed_post_runs_once_and_is_replayed(user: Any) -> None:
    view, key = Charges.as_view(), new_key()
    first = charge(view, key=key, user=user, amount=10)
    again = charge(view, key=key, user=user, amount=10)
    assert first.status_code == again.status_code == 201
    assert json.loads(again.content) == json.loads(first.content)
    assert again["Idempotent-Replayed"] == "true"
    assert IdempotencyRecord.objects.filter(key=key).count() == 1
    other = charge(view, key=key, user=user, amount=11)
    assert other.status_code == 422


def test_a_refused_caller_never_reaches_the_key(user: Any) -> None:
    key = new_key()
    assert charge(Charges.as_view(), key=key).status_code in {401, 403}
    assert not IdempotencyRecord.objects.filter(key=key).exists()
    assert charge(Charges.as_view(), key=key, user=user).status_code == 201


def test_only_the_named_unsafe_actions_take_part(user: Any) -> None:
    view, key = Charges.as_view(), new_key()
    before = RUNS.count
    assert charge(view, "patch", key, user).status_code == 200
    assert charge(view, "patch", key, user).status_code == 200
    assert RUNS.count - before == 2 and not IdempotencyRecord.objects.filter(key=key).exists()
    refused = charge(view, "put", key, user)  # the view's own exception handling answers it
    assert refused.status_code == 400 and problem(refused)["errors"] == {"amount": ["required"]}
    assert IdempotencyRecord.objects.filter(key=key).exists()


def test_the_class_attributes_and_hooks_make_the_policy(user: Any) -> None:
    policy = Configured().get_idempotency_policy()
    assert (policy.required, policy.ttl, policy.redact) == (True, 60.0, ["card"])
    assert policy.fingerprint is not None and policy.fingerprint(None, {}) == "same"
    assert policy.get_scope(HttpRequest()) == "tenant-1"
    assert policy.on_replay is not None
    assert Charges().get_idempotency_policy().on_replay is None  # not overridden
    view, key = Configured.as_view(), new_key()
    missing = charge(view, user=user)
    assert missing.status_code == 400 and problem(missing)["code"]
    charge(view, key=key, user=user, amount=1)
    again = charge(view, key=key, user=user, amount=2)  # one fingerprint for every body
    assert again["Idempotent-Replayed"] == "true" and again["X-Replayed-At"] == "now"
    assert IdempotencyRecord.objects.get(key=key).scope == "tenant-1"


class Plain(APIView):
    """A DRF view of the project, with no mixin."""

    def post(self, request: Request) -> Response:
        return Response(status=201)


class Unbuildable(Charges):
    def __init__(self, **kwargs: Any) -> None:
        raise RuntimeError("needs arguments")


def test_drf_as_a_framework_builds_the_views_it_owns() -> None:
    drf = DjangoRestFramework()
    assert drf.owns(Plain) and not drf.owns(HttpRequest)
    assert not drf.handles_keys(Plain) and drf.handles_keys(Charges)
    built = drf.view_class(Plain, Policy(ttl=5.0))
    assert built is not None and issubclass(built, IdempotentMixin) and issubclass(built, Plain)
    assert (built.__name__, built.__qualname__) == ("Plain", Plain.__qualname__)
    assert built().get_idempotency_policy().ttl == 5.0
    assert drf.view_class(HttpRequest, Policy()) is None
    assert drf.class_policy(Plain, None) is None
    assert drf.class_policy(Unbuildable, None) is None
    found = drf.class_policy(Configured, Configured.as_view())
    assert found is not None and found.ttl == 60.0


class Savepoints(APIView):
    """Answers how deep in transactions its body runs."""

    def post(self, request: Request) -> Response:
        return Response({"depth": len(connection.savepoint_ids)}, status=201)


def test_a_substituted_view_keeps_djangos_atomic_requests_rule(user: Any) -> None:
    drf = DjangoRestFramework()
    callback = Savepoints.as_view()
    opted_out = transaction.non_atomic_requests(Savepoints.as_view())
    outside = len(connection.savepoint_ids)

    def depth(view: Any) -> int:
        return int(json.loads(charge(view, key=new_key(), user=user).content)["depth"])

    plain = depth(drf.substitute(Savepoints, callback))  # atomic mode's own transaction
    connections.settings["default"]["ATOMIC_REQUESTS"] = True
    try:
        assert depth(drf.substitute(Savepoints, callback)) == plain + 1
        lease = drf.substitute(Savepoints, opted_out)
        assert lease.view_class.idempotency_mode == "lease"  # no transaction asked
        assert depth(lease) == outside
    finally:
        connections.settings["default"]["ATOMIC_REQUESTS"] = False
    assert drf.substitute(HttpRequest, callback) is None


def test_the_view_behind_a_request_answers_and_renders(user: Any) -> None:
    drf = DjangoRestFramework()
    django_request = APIRequestFactory().post("/", {"a": 1}, format="json")
    assert view_of(django_request) is None and drf.parsed_data(django_request) is None
    view = Charges()
    request = view.initialize_request(django_request)
    view.request, view.args, view.kwargs = request, (), {}
    view.format_kwarg, view.headers = None, {}
    assert view_of(request) is view
    assert drf.parsed_data(request) is None  # not parsed yet: the raw body is the truth
    assert request.data == {"a": 1}
    assert drf.parsed_data(request) == ({"a": 1}, request.FILES)
    convert, finalize = hooks(view, request)
    answered = convert(ValidationError({"a": ["bad"]}))
    rendered = finalize(answered)
    assert rendered.status_code == 400 and problem(rendered)["errors"] == {"a": ["bad"]}
    assert drf.answers(view, request) is not None and drf.answers(object(), django_request) is None
