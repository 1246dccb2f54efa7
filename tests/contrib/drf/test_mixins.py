"""``IdempotentMixin`` and ``DjangoRestFramework`` (idempotency.contrib.drf.mixins): class
attributes over the view's policy, the actions that take part, a keyed POST run once and
replayed, what the framework hook answers about DRF views and requests; through a request,
a refused caller never reaches the key, the class's hooks apply, a substituted view keeps
Django's ATOMIC_REQUESTS rule, and the view's own exception handling answers; and DRF's
views under the decorator, the middleware and the fingerprint."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, connections, transaction
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory, override_settings
from rest_framework.decorators import api_view
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from idempotency import idempotent
from idempotency.contrib.drf.mixins import DjangoRestFramework, IdempotentMixin, hooks, view_of
from idempotency.exceptions import ImproperlyApplied
from idempotency.http.options import Policy
from idempotency.models import IdempotencyRecord
from tests.support.counting import Counter
from tests.support.http import new_key, post
from tests.support.problems import problem
from tests.support.users import logged_in_client, make_user
from tests.testapp import drf_views
from tests.testapp.matrix_bodies import COUNTER_ENV
from tests.testapp.models import Effect, Wallet


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


def test_an_instance_value_wins_and_a_plain_function_attribute_is_not_bound() -> None:
    """``as_view(idempotency_ttl=...)`` sets the value on the instance; a function given
    without ``staticmethod`` is the function, not a method of the view."""

    class Plain(Counted):
        idempotency_fingerprint = fingerprint

    policy = Plain(idempotency_ttl=9).get_idempotency_policy()
    assert (policy.ttl, policy.fingerprint) == (9, fingerprint)


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


# -- through a request: the key after authentication, the hooks, ATOMIC_REQUESTS ----------

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


@pytest.mark.django_db
def test_a_refused_caller_never_reaches_the_key(user: Any) -> None:
    key = new_key()
    assert charge(Charges.as_view(), key=key).status_code in {401, 403}
    assert not IdempotencyRecord.objects.filter(key=key).exists()
    assert charge(Charges.as_view(), key=key, user=user).status_code == 201


@pytest.mark.django_db
def test_only_the_named_unsafe_actions_take_part(user: Any) -> None:
    view, key = Charges.as_view(), new_key()
    before = RUNS.count
    assert charge(view, "patch", key, user).status_code == 200
    assert charge(view, "patch", key, user).status_code == 200
    assert RUNS.count - before == 2 and not IdempotencyRecord.objects.filter(key=key).exists()
    refused = charge(view, "put", key, user)  # the view's own exception handling answers it
    assert refused.status_code == 400 and problem(refused)["errors"] == {"amount": ["required"]}
    assert IdempotencyRecord.objects.filter(key=key).exists()


@pytest.mark.django_db
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


class Savepoints(APIView):
    """Answers how deep in transactions its body runs."""

    def post(self, request: Request) -> Response:
        return Response({"depth": len(connection.savepoint_ids)}, status=201)


@pytest.mark.django_db
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


@pytest.mark.django_db
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


# -- DRF's views under the decorator, the middleware and the fingerprint ------------------
# (the framework hook, DjangoRestFramework, is what tells them apart: moved here from
# tests/http/test_decorators.py, test_middleware.py and test_fingerprints.py, whose plain
# Django tests run without DRF)

MIDDLEWARE = [*settings.MIDDLEWARE, "idempotency.IdempotencyMiddleware"]


def test_decorating_as_view_result_is_refused() -> None:
    with pytest.raises(ImproperlyApplied, match="before authentication"):
        idempotent(drf_views.PlainApi.as_view())

    @api_view(["POST"])
    def func(request: Any) -> HttpResponse:
        return HttpResponse()

    with pytest.raises(ImproperlyApplied):
        idempotent(func)


def test_decorating_an_apiview_class_mixes_the_mixin_in() -> None:
    cls = idempotent(ttl=60)(drf_views.PlainApi)
    assert issubclass(cls, IdempotentMixin) and issubclass(cls, APIView)
    assert cls.idempotency_policy.ttl == 60


@pytest.mark.urls("tests.urls")
@pytest.mark.django_db(transaction=True)
def test_middleware_replays_drf_views_only_after_drf_authentication(
    client_a: Client, wallet: Wallet
) -> None:
    key = str(uuid.uuid4())
    with override_settings(MIDDLEWARE=MIDDLEWARE):
        post(client_a, "/t/plain-api/", key=key)
        stranger = post(Client(HTTP_AUTHORIZATION="Token bad"), "/t/plain-api/", key=key)
    assert stranger.status_code == 401
    assert "Idempotent-Replayed" not in stranger


@pytest.mark.urls("tests.urls")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("body", "content_type", "parsed"),
    [
        (b'{"a": [1, 2]}', "application/json", {"a": [1, 2]}),
        (b"a=1&b=2", "application/x-www-form-urlencoded", {"a": "1", "b": "2"}),
    ],
)
def test_drf_still_parses_the_body_after_the_fingerprint(
    user: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    body: bytes,
    content_type: str,
    parsed: dict[str, Any],
) -> None:
    """Under the middleware, which read the raw body for the fingerprint."""
    monkeypatch.setenv(COUNTER_ENV, str(tmp_path / "executions"))  # the view counts its runs
    client = logged_in_client(user)
    key = str(uuid.uuid4())
    with override_settings(MIDDLEWARE=MIDDLEWARE):
        first = client.put(
            "/m/x/echo-api/",
            data=body,
            content_type=content_type,
            headers={"Idempotency-Key": key, "X-Probe": "echo"},
        )
        other = client.put(
            "/m/x/echo-api/",
            data=body + b"0",
            content_type=content_type,
            headers={"Idempotency-Key": key, "X-Probe": "echo"},
        )
    assert first.status_code == 200, first.content
    assert json.loads(first.content) == {"data": parsed}
    assert other.status_code == 422


FORM = "application/x-www-form-urlencoded"


@pytest.mark.urls("tests.urls")
def test_a_body_in_another_charset_is_refused_not_replayed(
    store_variant: str, client_a: Any, wallet: Any
) -> None:
    """Over HTTP, on every store: DRF read the second body as another label, yet it was
    answered with the first one's stored response. (The fingerprint's charset without
    DRF: tests/http/test_fingerprints.py; Django itself answers 400 to a form that is
    not UTF-8, so no plain view reads one.)"""
    key = str(uuid.uuid4())

    def post(charset: str) -> Any:
        return client_a.post(
            "/t/api/", data="label=%E9&amount=1", content_type=f"{FORM}; charset={charset}",
            HTTP_IDEMPOTENCY_KEY=key,
        )  # fmt: skip

    first = post("iso-8859-1")
    assert first.status_code == 201 and json.loads(first.content)["label"] == "\u00e9"
    assert post("iso-8859-1")["Idempotent-Replayed"] == "true"
    other = post("utf-8")
    assert other.status_code == 422, other.content


@pytest.mark.django_db
@pytest.mark.parametrize("mixin", [False, True])
def test_drf_authentication_reading_request_data_first(mixin: bool) -> None:
    """An authentication class that reads ``request.data`` consumes the stream before the
    fingerprint (DRF 3.14/3.15 then made ``request.body`` raise RawPostDataException)."""
    from django.contrib.auth import get_user_model
    from rest_framework.authentication import BaseAuthentication
    from rest_framework.permissions import AllowAny

    user = get_user_model().objects.create_user(username="reader")
    runs: list[object] = []

    class ReadsData(BaseAuthentication):
        def authenticate(self, request: Request) -> tuple[object, None]:
            assert "amount" in request.data
            return (user, None)

    class Base(APIView):
        authentication_classes = [ReadsData]
        permission_classes = [AllowAny]

        def post(self, request: Request) -> Response:
            runs.append(request.data["amount"])
            return Response({"amount": request.data["amount"], "run": len(runs)}, status=201)

    if mixin:
        view = type("MixedIn", (IdempotentMixin, Base), {}).as_view()
    else:
        view = type("Decorated", (Base,), {"post": idempotent(Base.post)}).as_view()

    factory = APIRequestFactory()

    def call(body: dict[str, object], fmt: str) -> Any:
        request = factory.post("/x/", body, format=fmt, HTTP_IDEMPOTENCY_KEY=f"k-{fmt}")
        return view(request)

    for fmt in ("json", "multipart"):
        first = call({"amount": 1}, fmt)
        again = call({"amount": 1}, fmt)
        other = call({"amount": 999}, fmt)
        assert first.status_code == 201, first.content
        assert again["Idempotent-Replayed"] == "true"
        assert again.content == first.content
        assert other.status_code == 422
    assert len(runs) == 2


@pytest.mark.django_db(transaction=True)
def test_mixin_limits_actions_and_takes_class_attributes(client_a: Client, wallet: Wallet) -> None:
    rf = RequestFactory()

    class Limited(IdempotentMixin, APIView):
        idempotent_actions = ("put",)
        idempotency_required = True

        def post(self, request: Any) -> HttpResponse:
            return HttpResponse(json.dumps({"n": Effect.objects.create(label="p").pk}), status=201)

        def put(self, request: Any) -> HttpResponse:
            return HttpResponse(json.dumps({"n": Effect.objects.create(label="u").pk}), status=200)

    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username="alice")
    view = Limited.as_view()

    def call(method: str, key: str | None) -> Any:
        extra = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
        request: HttpRequest = getattr(rf, method)(
            "/x/", data="{}", content_type="application/json", **extra
        )
        force_authenticate(request, user=user)
        return view(request)

    assert call("post", None).status_code == 201  # not an idempotent action: no key needed
    assert call("put", None).status_code == 400  # required on put
    k = str(uuid.uuid4())
    first = call("put", k)
    again = call("put", k)
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content


def test_in_flow_sees_a_context_bound_on_either_request() -> None:
    """An inner interface finds ``request.idempotency`` whether the outer one bound it on
    the DRF ``Request`` (the mixin) or on the Django request it wraps (the middleware)
    (on a plain request alone: tests/http/test_decorators.py)."""
    from idempotency.http.requests import IdempotencyContext, in_flow
    from idempotency.stores.cache import CacheStore

    def context() -> IdempotencyContext:
        return IdempotencyContext("scope", "key", "fp", "lease", CacheStore())

    plain = RequestFactory().post("/x/")
    wrapped = Request(RequestFactory().post("/x/"))
    assert not in_flow(wrapped)
    plain.idempotency = context()  # type: ignore[attr-defined]
    assert in_flow(Request(plain))  # the middleware bound it, DRF wrapped it after
    wrapped.idempotency = context()  # type: ignore[attr-defined]
    assert in_flow(wrapped)  # the mixin bound it on the DRF request
    assert not in_flow(wrapped._request)
