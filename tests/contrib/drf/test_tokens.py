"""``idempotency/contrib/drf/tokens.py``: ``SubmitTokenPermission`` spends a fresh token on
an unsafe request once the caller is known (not for an anonymous caller, a safe method, a
method the view lacks, or the browsable API's clones of a GET), and
``SubmitTokenIssueView`` issues tokens bound to the caller, for the purposes it offers,
answered ``no-store``. (Through URLs, beside the function-view decorator:
tests/tokens/test_tokens.py.)"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from idempotency.contrib.drf.tokens import SubmitTokenIssueView, SubmitTokenPermission
from idempotency.exceptions import ImproperlyApplied
from idempotency.tokens import consume_submit_token, issue_submit_token
from tests.support.counting import Counter
from tests.support.problems import problem

pytestmark = pytest.mark.django_db

RUNS = Counter()


class Orders(APIView):
    permission_classes = [IsAuthenticated, SubmitTokenPermission]
    submit_token_purpose = "order"

    def get(self, request: Request) -> Response:
        return Response({"orders": []})

    def post(self, request: Request) -> Response:
        RUNS()
        return Response(status=201)


class PerAction(Orders):
    def get_submit_token_purpose(self) -> str:
        return "per-action"


class Unguarded(Orders):
    permission_classes = [SubmitTokenPermission]  # alone: it refuses anonymous callers itself


class Unnamed(Orders):
    submit_token_purpose = ""


class CheckoutTokens(SubmitTokenIssueView):
    allowed_purposes = frozenset({"checkout", "refund"})
    token_ttl = 30.0


def submit(view: type[APIView], method: str, user: Any = None, token: str | None = None,
         **data: Any) -> Any:  # fmt: skip
    headers = {} if token is None else {"HTTP_X_SUBMIT_TOKEN": token}
    request = getattr(APIRequestFactory(), method)("/", data or None, format="json", **headers)
    if user is not None:
        force_authenticate(request, user=user)
    response = view.as_view()(request)
    if isinstance(response, Response):
        response.render()
    return response


def test_an_unsafe_request_spends_a_fresh_token_once(user: Any) -> None:
    before = RUNS.count
    token = issue_submit_token(user_or_scope=user, purpose="order")
    assert submit(Orders, "post", user, token).status_code == 201
    again = submit(Orders, "post", user, token)
    assert again.status_code == 409 and problem(again)["code"] == "submit-token-used"
    missing = submit(Orders, "post", user)
    assert missing.status_code == 400 and "X-Submit-Token" in problem(missing)["detail"]
    assert RUNS.count - before == 1
    assert submit(Orders, "get", user).status_code == 200  # safe: no token


def test_the_purpose_comes_from_the_view_or_its_method(user: Any) -> None:
    order = issue_submit_token(user_or_scope=user, purpose="order")
    assert submit(PerAction, "post", user, order).status_code == 400
    per_action = issue_submit_token(user_or_scope=user, purpose="per-action")
    assert submit(PerAction, "post", user, per_action).status_code == 201
    consume_submit_token(token=order, user_or_scope=user, purpose="order")  # unspent
    with pytest.raises(ImproperlyApplied, match="names no submit_token_purpose"):
        submit(Unnamed, "post", user, order)


def test_no_token_is_spent_for_a_caller_refused_or_a_method_the_view_lacks(user: Any) -> None:
    token = issue_submit_token(user_or_scope=user, purpose="order")
    assert submit(Orders, "post", None, token).status_code in {401, 403}
    assert submit(Unguarded, "post", None, token).status_code in {401, 403}
    assert submit(Orders, "put", user, token).status_code == 405
    assert submit(Orders, "post", user, token).status_code == 201  # still fresh


def test_the_issue_view_issues_a_token_bound_to_the_caller(user: Any) -> None:
    before = timezone.now()
    issued = submit(SubmitTokenIssueView, "post", user, purpose="order")
    assert issued.status_code == 201 and issued["Cache-Control"] == "no-store"
    body = json.loads(issued.content)
    assert set(body) == {"token", "purpose", "expires_at"} and body["purpose"] == "order"
    assert datetime.fromisoformat(body["expires_at"]) >= before + timedelta(seconds=600)
    assert submit(Orders, "post", user, body["token"]).status_code == 201
    assert SubmitTokenIssueView.idempotency_exempt is True
    assert submit(SubmitTokenIssueView, "post", None, purpose="order").status_code in {401, 403}
    assert submit(SubmitTokenIssueView, "post", user, purpose="").status_code == 400


def test_a_subclass_offers_only_its_purposes_for_its_lifetime(user: Any) -> None:
    refused = submit(CheckoutTokens, "post", user, purpose="order")
    assert refused.status_code == 400
    offered = submit(CheckoutTokens, "post", user, purpose="refund")
    assert offered.status_code == 201
    expires_at = datetime.fromisoformat(json.loads(offered.content)["expires_at"])
    assert expires_at <= timezone.now() + timedelta(seconds=30)
    serializer = CheckoutTokens().get_input_serializer_class()
    assert sorted(serializer().fields["purpose"].choices) == ["checkout", "refund"]
    assert (
        SubmitTokenIssueView().get_input_serializer_class() is SubmitTokenIssueView.InputSerializer
    )
