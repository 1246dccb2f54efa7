"""``idempotency/tokens/views.py``: ``@require_submit_token`` lets an unsafe request through
only with a fresh token in the ``SUBMIT_TOKEN_HEADER`` header, bound to the request's user
(or to ``scope(request)``), answering 400 or 409 problems without running the view; safe
methods pass untouched, and it refuses to decorate what would run before authentication.
(Through URLs, beside DRF's permission: tests/tokens/test_tokens.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory, override_settings
from django.views import View
from rest_framework.decorators import api_view

from idempotency.exceptions import ImproperlyApplied
from idempotency.tokens import issue_submit_token, require_submit_token
from tests.support.counting import Counter
from tests.support.problems import problem
from tests.support.stores import tokens_using
from tests.support.users import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs() -> Counter:
    return Counter()


@pytest.fixture
def checkout_view(runs: Counter) -> Any:
    @require_submit_token("checkout")
    def view(request: HttpRequest) -> HttpResponse:
        runs()
        return HttpResponse(status=201)

    return view


def request_of(method: str, user: Any = None, token: str | None = None, **headers: str) -> Any:
    if token is not None:
        headers["X-Submit-Token"] = token
    request = RequestFactory().generic(method, "/checkout/", headers=headers)
    request.user = user if user is not None else AnonymousUser()
    return request


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
def test_safe_methods_pass_without_a_token(checkout_view: Any, runs: Counter, method: str) -> None:
    assert checkout_view(request_of(method)).status_code == 201
    assert runs.count == 1


def test_a_token_passes_once_then_409_and_a_missing_one_400(
    checkout_view: Any, runs: Counter
) -> None:
    alice = make_user("alice")
    token = issue_submit_token(user_or_scope=alice, purpose="checkout")
    assert checkout_view(request_of("POST", alice, token)).status_code == 201
    again = checkout_view(request_of("POST", alice, token))
    assert again.status_code == 409 and problem(again)["code"] == "submit-token-used"
    missing = checkout_view(request_of("POST", alice))
    assert missing.status_code == 400 and "X-Submit-Token header" in problem(missing)["detail"]
    blank = checkout_view(request_of("PUT", alice, "   "))
    assert blank.status_code == 400 and "X-Submit-Token header" in problem(blank)["detail"]
    padded = issue_submit_token(user_or_scope=alice, purpose="checkout")
    assert checkout_view(request_of("PATCH", alice, f"  {padded} ")).status_code == 201
    assert runs.count == 2


def test_a_token_of_another_user_purpose_or_of_nobody_is_refused(
    checkout_view: Any, runs: Counter
) -> None:
    alice, bob = make_user("alice"), make_user("bob")
    bobs = issue_submit_token(user_or_scope=bob, purpose="checkout")
    other_purpose = issue_submit_token(user_or_scope=alice, purpose="transfer")
    for user, token in [(alice, bobs), (alice, other_purpose), (None, bobs)]:
        refused = checkout_view(request_of("POST", user, token))
        assert refused.status_code == 400
        assert problem(refused)["code"] == "submit-token-invalid"
    assert runs.count == 0
    assert checkout_view(request_of("DELETE", bob, bobs)).status_code == 201  # bob's is unspent


def test_the_scope_and_the_header_can_be_chosen(runs: Counter) -> None:
    @require_submit_token("vote", scope=lambda request: request.headers.get("X-Session"))
    def vote(request: HttpRequest) -> HttpResponse:
        runs()
        return HttpResponse(status=201)

    token = issue_submit_token(user_or_scope="session:1", purpose="vote")
    with override_settings(IDEMPOTENCY={"SUBMIT_TOKEN_HEADER": "X-Form-Token"}):
        assert vote(request_of("POST", token=token, X_Session="session:1")).status_code == 400
        sent = request_of("POST", X_Session="session:1", X_Form_Token=token)
        assert vote(sent).status_code == 201
    assert runs.count == 1


def test_an_async_view_and_a_view_method_are_guarded_alike(runs: Counter) -> None:
    @require_submit_token("checkout")
    async def async_view(request: HttpRequest) -> HttpResponse:
        runs()
        return HttpResponse(status=201)

    class Checkout(View):
        @require_submit_token("checkout")
        def post(self, request: HttpRequest) -> HttpResponse:
            runs()
            return HttpResponse(status=201)

    alice = make_user("alice")
    token = issue_submit_token(user_or_scope=alice, purpose="checkout")
    assert async_to_sync(async_view)(request_of("POST", alice, token)).status_code == 201
    assert async_to_sync(async_view)(request_of("POST", alice, token)).status_code == 409
    token = issue_submit_token(user_or_scope=alice, purpose="checkout")
    view = Checkout.as_view()
    assert view(request_of("POST", alice, token)).status_code == 201
    assert view(request_of("POST", alice, token)).status_code == 409
    assert runs.count == 2
    assert async_view.submit_token_purpose == "checkout"  # type: ignore[attr-defined]  # marked


def test_an_unreachable_token_backend_is_answered_503(checkout_view: Any, runs: Counter) -> None:
    unreachable = tokens_using("redis", location="redis://127.0.0.1:1/0")
    with override_settings(IDEMPOTENCY=unreachable):
        answered = checkout_view(request_of("POST", make_user("alice"), "a-token"))
    assert answered.status_code == 503
    assert problem(answered)["code"] == "idempotency-store-unavailable"
    assert runs.count == 0


def test_what_would_run_before_authentication_is_refused() -> None:
    with pytest.raises(ImproperlyApplied, match="view class"):
        require_submit_token("x")(View)
    with pytest.raises(ImproperlyApplied, match="as_view"):
        require_submit_token("x")(View.as_view())
    with pytest.raises(ImproperlyApplied, match="below @api_view"):
        require_submit_token("x")(api_view(["POST"])(lambda request: None))
    with pytest.raises(ValueError):
        require_submit_token("")
    guarded = require_submit_token("x")(lambda: None)
    with pytest.raises(ImproperlyApplied, match="not called with a request"):
        guarded()
