"""One-time submit tokens on both backends: atomic consumption, binding, expiry, views."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.utils import timezone

from idempotency import consume_submit_token, issue_submit_token
from idempotency.exceptions import ImproperlyApplied, SubmitTokenInvalid, SubmitTokenUsed
from idempotency.models import SubmitToken
from idempotency.tokens import issue_token, purge_expired_submit_tokens, require_submit_token
from idempotency.tokens.base import TOMBSTONE_SECONDS, get_token_backend
from tests.support.clocks import age_token
from tests.support.counting import unique
from tests.support.problems import problem
from tests.support.stores import tokens_using
from tests.support.storms import run_threads

pytestmark = pytest.mark.django_db

BACKENDS = [
    pytest.param("database", id="database"),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    with override_settings(IDEMPOTENCY=tokens_using(request.param)):
        yield request.param


def make_user(name: str) -> Any:
    return get_user_model().objects.create_user(username=unique(name), password="pw")


@pytest.fixture
def alice() -> Any:
    return make_user("alice")


@pytest.fixture
def bob() -> Any:
    return make_user("bob")


def test_issue_and_consume_once(backend: str, alice: Any) -> None:
    token = issue_submit_token(user_or_scope=alice, purpose="checkout")
    assert len(token) >= 43  # 256 random bits, URL-safe base64
    assert token.replace("-", "").replace("_", "").isalnum()
    consume_submit_token(token=token, user_or_scope=alice, purpose="checkout")
    with pytest.raises(SubmitTokenUsed) as used:
        consume_submit_token(token=token, user_or_scope=alice, purpose="checkout")
    assert used.value.status_code == 409
    assert used.value.as_response().status_code == 409


def test_unknown_token_is_invalid(backend: str, alice: Any) -> None:
    with pytest.raises(SubmitTokenInvalid) as invalid:
        consume_submit_token(token="not-a-token", user_or_scope=alice, purpose="checkout")
    assert invalid.value.status_code == 400
    for bad in ("", "x" * 1000):
        with pytest.raises(SubmitTokenInvalid):
            consume_submit_token(token=bad, user_or_scope=alice, purpose="checkout")


def test_foreign_user_and_wrong_purpose_are_invalid_and_do_not_consume(
    backend: str, alice: Any, bob: Any
) -> None:
    token = issue_submit_token(user_or_scope=alice, purpose="checkout")
    with pytest.raises(SubmitTokenInvalid):
        consume_submit_token(token=token, user_or_scope=bob, purpose="checkout")
    with pytest.raises(SubmitTokenInvalid):
        consume_submit_token(token=token, user_or_scope=alice, purpose="refund")
    with pytest.raises(SubmitTokenInvalid):
        consume_submit_token(token=token, user_or_scope=f"auth.user:{bob.pk}", purpose="checkout")
    # still alice's, still fresh
    consume_submit_token(token=token, user_or_scope=f"auth.user:{alice.pk}", purpose="checkout")
    # after use: "used" only for its owner; others learn nothing
    with pytest.raises(SubmitTokenUsed):
        consume_submit_token(token=token, user_or_scope=alice, purpose="checkout")
    with pytest.raises(SubmitTokenInvalid):
        consume_submit_token(token=token, user_or_scope=bob, purpose="checkout")


def test_expired_token_is_invalid(backend: str, alice: Any) -> None:
    token = issue_submit_token(user_or_scope=alice, purpose="checkout", ttl=0.2)
    time.sleep(0.3)  # real time: the token's backend judges expiry by its own clock
    with pytest.raises(SubmitTokenInvalid):
        consume_submit_token(token=token, user_or_scope=alice, purpose="checkout")


def test_consumed_token_answers_used_past_its_expiry(backend: str, alice: Any) -> None:
    # a lifetime no stall of the test process outlasts before the consumption (0.2 s, then
    # a real sleep past it, could), passed on the backend's clock instead
    token = issue_submit_token(user_or_scope=alice, purpose="checkout", ttl=30)
    consume_submit_token(token=token, user_or_scope=alice, purpose="checkout")
    age_token(get_token_backend(), token, 31)  # past its expiry, within the tombstone's minute
    with pytest.raises(SubmitTokenUsed):
        consume_submit_token(token=token, user_or_scope=alice, purpose="checkout")


def test_scope_strings_and_anonymous(backend: str) -> None:
    from django.contrib.auth.models import AnonymousUser

    token = issue_submit_token(user_or_scope="session:abc", purpose="vote")
    with pytest.raises(SubmitTokenInvalid):
        consume_submit_token(token=token, user_or_scope=AnonymousUser(), purpose="vote")
    consume_submit_token(token=token, user_or_scope="session:abc", purpose="vote")
    with pytest.raises(ValueError):
        issue_submit_token(user_or_scope=AnonymousUser(), purpose="vote")
    with pytest.raises(ValueError):
        issue_submit_token(user_or_scope="session:abc", purpose="")


class ApiClient:
    """A principal of a custom DRF authentication: no model, its own primary keys."""

    is_authenticated = True

    def __init__(self, pk: int) -> None:
        self.pk = pk


def test_an_api_client_with_a_users_pk_never_shares_the_users_tokens(
    backend: str, alice: Any
) -> None:
    """Issue 43, finding 5: tokens were bound to ``user:<pk>`` whatever the principal's
    kind, so an API client with alice's primary key could spend alice's token (and the
    other way round). They are bound as scopes are: the principal's model and pk."""
    client = ApiClient(alice.pk)
    token = issue_submit_token(user_or_scope=alice, purpose="checkout")
    with pytest.raises(SubmitTokenInvalid):
        consume_submit_token(token=token, user_or_scope=client, purpose="checkout")
    theirs = issue_submit_token(user_or_scope=client, purpose="checkout")
    with pytest.raises(SubmitTokenInvalid):
        consume_submit_token(token=theirs, user_or_scope=alice, purpose="checkout")
    # each still spends its own
    consume_submit_token(token=token, user_or_scope=alice, purpose="checkout")
    consume_submit_token(token=theirs, user_or_scope=client, purpose="checkout")


def test_only_the_hash_is_stored_in_the_database(alice: Any) -> None:
    with override_settings(IDEMPOTENCY=tokens_using("database")):
        issued = issue_token(user_or_scope=alice, purpose="checkout")
    row = SubmitToken.objects.get()
    assert row.token_hash == hashlib.sha256(issued.token.encode()).hexdigest()
    assert issued.token not in {row.token_hash, row.scope, row.purpose}
    assert row.scope == f"auth.user:{alice.pk}" and row.purpose == "checkout"
    assert row.expires_at == issued.expires_at and row.consumed_at is None
    assert "open" in str(row)


def _keys(client: Any, pattern: str) -> list[str]:
    """KEYS on one Redis, or on every primary of a Redis Cluster."""
    extra = {"target_nodes": client.PRIMARIES} if hasattr(client, "get_primaries") else {}
    return sorted(k.decode() for k in client.keys(pattern, **extra))


@pytest.mark.redis
def test_only_the_hash_is_stored_in_redis(alice: Any) -> None:
    from idempotency.utils.redis_clients import RedisConnector

    with override_settings(IDEMPOTENCY=tokens_using("redis")):
        token = issue_submit_token(user_or_scope=alice, purpose="checkout", ttl=30)
        client = RedisConnector(cache="default").client
        keys = _keys(client, "*:st:*")
        assert len(keys) == 1
        assert hashlib.sha256(token.encode()).hexdigest() in keys[0]
        assert token not in keys[0] and token.encode() not in client.get(keys[0])
        assert 0 < client.pttl(keys[0]) <= 30_000
        consume_submit_token(token=token, user_or_scope=alice, purpose="checkout")
        # the token is gone; its tombstone (same hash tag) remains
        assert _keys(client, "*:st:*") == [f"{keys[0]}:used"]
        assert client.pttl(f"{keys[0]}:used") >= (TOMBSTONE_SECONDS - 1) * 1000


def test_purge_deletes_expired_tokens_but_keeps_fresh_tombstones(alice: Any) -> None:
    with override_settings(IDEMPOTENCY=tokens_using("database")):
        fresh = issue_submit_token(user_or_scope=alice, purpose="a", ttl=600)
        issue_submit_token(user_or_scope=alice, purpose="b", ttl=600)
        consume_submit_token(token=fresh, user_or_scope=alice, purpose="a")
        assert purge_expired_submit_tokens() == 0
        later = timezone.now() + timedelta(seconds=600 + TOMBSTONE_SECONDS + 1)
        assert purge_expired_submit_tokens(now=later, batch_size=1) == 2
        assert not SubmitToken.objects.exists()


# -- 20 concurrent consumers -----------------------------------------------------------


def _race(alice_scope: str, token: str) -> list[Any]:
    def consume(_index: int) -> str:
        consume_submit_token(token=token, user_or_scope=alice_scope, purpose="checkout")
        return "ok"

    return run_threads(20, consume)


def _check_race(results: list[Any]) -> None:
    assert results.count("ok") == 1, results
    used = [r for r in results if isinstance(r, SubmitTokenUsed)]
    assert len(used) == 19, results


@pytest.mark.server_db
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_consumptions_on_postgres_one_wins(alice: Any) -> None:
    with override_settings(IDEMPOTENCY=tokens_using("database")):
        token = issue_submit_token(user_or_scope=alice, purpose="checkout")
        _check_race(_race(f"auth.user:{alice.pk}", token))
    assert SubmitToken.objects.get().consumed_at is not None


@pytest.mark.redis
def test_twenty_concurrent_consumptions_on_redis_one_wins(alice: Any) -> None:
    with override_settings(IDEMPOTENCY=tokens_using("redis")):
        token = issue_submit_token(user_or_scope=alice, purpose="checkout")
        _check_race(_race(f"auth.user:{alice.pk}", token))


# -- views -----------------------------------------------------------------------------


@pytest.fixture
def client_alice(alice: Any) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def post(client: Client, path: str, token: str | None = None, **data: Any) -> Any:
    headers = {"X-Submit-Token": token} if token is not None else {}
    return client.post(path, data=data, content_type="application/json", headers=headers)


VIEW_PATHS = [
    pytest.param("/checkout/", "checkout", id="function-view"),
    pytest.param("/async-checkout/", "checkout", id="async-function-view"),
    pytest.param("/transfer/", "transfer", id="drf-method"),
    pytest.param("/api-view/", "api-view", id="api-view"),
    pytest.param("/orders/", "order", id="drf-permission"),
]


@pytest.mark.urls("tests.testapp.token_urls")
@pytest.mark.parametrize(("path", "purpose"), VIEW_PATHS)
def test_views_answer_201_then_409_then_400(
    backend: str, client_alice: Client, alice: Any, bob: Any, path: str, purpose: str
) -> None:
    token = issue_submit_token(user_or_scope=alice, purpose=purpose)
    first = post(client_alice, path, token)
    assert first.status_code == 201, first.content

    again = post(client_alice, path, token)
    assert again.status_code == 409
    body = problem(again)
    assert body["code"] == "submit-token-used" and body["status"] == 409

    missing = post(client_alice, path)
    assert missing.status_code == 400
    assert problem(missing)["code"] == "submit-token-invalid"

    foreign = issue_submit_token(user_or_scope=bob, purpose=purpose)
    refused = post(client_alice, path, foreign)
    assert refused.status_code == 400
    assert problem(refused)["code"] == "submit-token-invalid"
    # bob's token was not spent by alice's attempt
    consume_submit_token(token=foreign, user_or_scope=bob, purpose=purpose)

    wrong_purpose = issue_submit_token(user_or_scope=alice, purpose="something-else")
    assert post(client_alice, path, wrong_purpose).status_code == 400


@pytest.mark.urls("tests.testapp.token_urls")
def test_safe_methods_need_no_token(client_alice: Client) -> None:
    assert client_alice.get("/checkout/").status_code == 200
    assert client_alice.get("/orders/").status_code == 200


@pytest.mark.urls("tests.testapp.token_urls")
def test_permission_refuses_anonymous_callers_before_touching_the_token(alice: Any) -> None:
    token = issue_submit_token(user_or_scope=alice, purpose="order")
    anonymous = post(Client(), "/orders/", token)
    assert anonymous.status_code in {401, 403}
    consume_submit_token(token=token, user_or_scope=alice, purpose="order")  # still fresh


@pytest.mark.urls("tests.testapp.token_urls")
def test_permission_without_a_purpose_is_improperly_applied(client_alice: Client) -> None:
    with pytest.raises(ImproperlyApplied):
        post(client_alice, "/unnamed/", "anything")


def test_decorator_misapplied() -> None:
    from rest_framework.decorators import api_view
    from rest_framework.views import APIView

    with pytest.raises(ImproperlyApplied):
        require_submit_token("x")(APIView)
    with pytest.raises(ImproperlyApplied):
        require_submit_token("x")(api_view(["POST"])(lambda request: None))
    with pytest.raises(ValueError):
        require_submit_token("")


@pytest.mark.urls("tests.testapp.token_urls")
def test_issue_view(backend: str, client_alice: Client, alice: Any) -> None:
    response = post(client_alice, "/api/idempotency/tokens/", purpose="order")
    assert response.status_code == 201, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["purpose"] == "order"
    assert set(body) == {"token", "purpose", "expires_at"}
    assert post(client_alice, "/orders/", body["token"]).status_code == 201
    assert post(client_alice, "/orders/", body["token"]).status_code == 409

    assert post(Client(), "/api/idempotency/tokens/", purpose="order").status_code in {401, 403}
    assert post(client_alice, "/api/idempotency/tokens/", purpose="").status_code == 400
    restricted = "/api/idempotency/checkout-tokens/"
    assert post(client_alice, restricted, purpose="order").status_code == 400
    assert post(client_alice, restricted, purpose="checkout").status_code == 201


def test_permission_ignores_the_browsable_apis_post_clones_of_a_get(alice: Any) -> None:
    from rest_framework.request import Request, clone_request
    from rest_framework.test import APIRequestFactory

    from idempotency.contrib.drf.tokens import SubmitTokenPermission
    from tests.testapp.token_views import OrderApi

    token = issue_submit_token(user_or_scope=alice, purpose="order")
    get = Request(APIRequestFactory().get("/orders/", HTTP_X_SUBMIT_TOKEN=token))
    get.user = alice
    clone = clone_request(get, "POST")
    assert clone.method == "POST"
    assert SubmitTokenPermission().has_permission(clone, OrderApi()) is True
    consume_submit_token(token=token, user_or_scope=alice, purpose="order")  # not spent
