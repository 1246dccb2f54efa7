"""Submit tokens in DRF views (idempotency.contrib.drf.tokens): the issuing view answers a
fresh token bound to the caller, never stored; the permission spends one token per unsafe
request of the view's purpose, lets safe and unknown methods through without one, and
refuses a view that names no purpose. What is kept of the issuing view's answers (issue 36,
finding 6): no token, read back raw from every store."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.test import Client, override_settings
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from idempotency.contrib.drf.tokens import SubmitTokenIssueView, SubmitTokenPermission
from idempotency.exceptions import ImproperlyApplied
from idempotency.tokens import issue_submit_token
from tests.support.at_rest import stored_anywhere
from tests.support.stores import STORE_VARIANTS
from tests.support.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)

HEADER = "HTTP_X_SUBMIT_TOKEN"


class Checkout(APIView):
    """Counts the unsafe requests the permission let through."""

    permission_classes = [SubmitTokenPermission]
    submit_token_purpose = "checkout"
    runs = 0

    def post(self, request: Request) -> Response:
        type(self).runs += 1
        return Response({"ok": True}, status=201)

    def get(self, request: Request) -> Response:
        return Response({"ok": True})


def request_as(view: Any, method: str, user: Any, **extra: Any) -> Any:
    request = getattr(APIRequestFactory(), method)("/", {}, format="json", **extra)
    if user is not None:
        force_authenticate(request, user=user)
    return view(request)


def test_the_issuing_view_answers_a_fresh_token_never_stored() -> None:
    user = make_user("issuer")
    view = SubmitTokenIssueView.as_view()
    request = APIRequestFactory().post("/", {"purpose": "checkout"}, format="json")
    force_authenticate(request, user=user)
    first = view(request)
    request = APIRequestFactory().post("/", {"purpose": "checkout"}, format="json")
    force_authenticate(request, user=user)
    again = view(request)
    assert first.status_code == again.status_code == 201
    assert first.data["purpose"] == "checkout" and first.data["expires_at"]
    assert first.data["token"] != again.data["token"]
    assert first["Cache-Control"] == "no-store"
    assert SubmitTokenIssueView.idempotency_exempt is True


def test_the_issuing_view_offers_only_the_allowed_purposes() -> None:
    view = type("Offered", (SubmitTokenIssueView,), {"allowed_purposes": frozenset({"a"})})
    user = make_user("offered")
    request = APIRequestFactory().post("/", {"purpose": "b"}, format="json")
    force_authenticate(request, user=user)
    assert view.as_view()(request).status_code == 400
    request = APIRequestFactory().post("/", {"purpose": "a"}, format="json")
    force_authenticate(request, user=user)
    assert view.as_view()(request).status_code == 201


def test_the_permission_spends_one_token_per_unsafe_request() -> None:
    Checkout.runs = 0
    user = make_user("buyer")
    token = issue_submit_token(user_or_scope=user, purpose="checkout")
    view = Checkout.as_view()
    assert request_as(view, "post", user, **{HEADER: token}).status_code == 201
    used = request_as(view, "post", user, **{HEADER: token})
    assert used.status_code == 409 and json.loads(used.content)["code"] == "submit-token-used"
    missing = request_as(view, "post", user)
    assert missing.status_code == 400
    assert json.loads(missing.content)["code"] == "submit-token-invalid"
    assert Checkout.runs == 1


def test_a_token_of_another_purpose_or_user_is_refused_and_stays_unspent() -> None:
    Checkout.runs = 0
    user, other = make_user("owner"), make_user("other")
    token = issue_submit_token(user_or_scope=user, purpose="checkout")
    foreign = issue_submit_token(user_or_scope=user, purpose="refund")
    view = Checkout.as_view()
    assert request_as(view, "post", other, **{HEADER: token}).status_code == 400
    assert request_as(view, "post", user, **{HEADER: foreign}).status_code == 400
    assert request_as(view, "post", user, **{HEADER: token}).status_code == 201
    assert Checkout.runs == 1


def test_safe_methods_and_anonymous_callers_spend_nothing() -> None:
    Checkout.runs = 0
    user = make_user("browser")
    token = issue_submit_token(user_or_scope=user, purpose="checkout")
    view = Checkout.as_view()
    assert request_as(view, "get", user).status_code == 200
    assert request_as(view, "post", None, **{HEADER: token}).status_code in (401, 403)
    assert request_as(view, "put", user, **{HEADER: token}).status_code == 405  # no such method
    assert request_as(view, "post", user, **{HEADER: token}).status_code == 201  # still unspent


def test_a_view_that_names_no_purpose_is_refused() -> None:
    class Nameless(Checkout):
        submit_token_purpose = ""

    request = Request(APIRequestFactory().post("/"))
    request.user = make_user("nameless")
    with pytest.raises(ImproperlyApplied, match="submit_token_purpose"):
        SubmitTokenPermission().has_permission(request, Nameless())


def test_a_purpose_may_come_from_the_view_per_action() -> None:
    class PerAction(Checkout):
        def get_submit_token_purpose(self) -> str:
            return "per-action"

    assert SubmitTokenPermission().purpose_for(PerAction()) == "per-action"


# -- what is kept of the issuing view's answers (issue 36, finding 6) ----------------------

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "idempotency.IdempotencyMiddleware",
]


@pytest.mark.urls("tests.urls")  # /t/data/: the test app's data views
def test_the_token_endpoint_under_the_middleware_stores_no_token(client_a: Client) -> None:
    """The finding: ``POST /api/idempotency/tokens/`` with a key under the middleware kept
    the raw submit token in the record, where the token table keeps only its hash."""
    key = str(uuid.uuid4())
    with override_settings(MIDDLEWARE=MIDDLEWARE):
        answers = [
            client_a.post(
                "/t/data/tokens/",
                data={"purpose": "checkout"},
                content_type="application/json",
                HTTP_IDEMPOTENCY_KEY=key,
            )
            for _ in range(2)
        ]
    tokens = [json.loads(a.content)["token"] for a in answers]
    assert [a.status_code for a in answers] == [201, 201]
    assert tokens[0] != tokens[1]  # left alone: each request issues its own
    for token in tokens:
        assert not stored_anywhere(token.encode())


@pytest.mark.urls("tests.urls")
def test_a_token_view_with_keys_handled_keeps_its_status_only(
    store_variant: str, client_a: Client
) -> None:
    key = str(uuid.uuid4())
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[store_variant]):
        first, again = (
            client_a.post(
                "/t/data/idempotent-tokens/",
                data={"purpose": "checkout"},
                content_type="application/json",
                HTTP_IDEMPOTENCY_KEY=key,
            )
            for _ in range(2)
        )
        token = json.loads(first.content)["token"]
        assert not stored_anywhere(token.encode())
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true" and again.content == b""
