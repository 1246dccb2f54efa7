"""Django Ninja's authentication and the default scope: the key is claimed after Ninja
authenticated the caller, and scoped to Ninja's principal (``request.auth``)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client, override_settings

from idempotency.models import IdempotencyRecord
from idempotency.scopes import principal_of, principal_scope
from tests.support.http import post
from tests.testapp.executions import executions
from tests.testapp.models import Wallet

pytestmark = pytest.mark.django_db(transaction=True)


def bearer(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.mark.parametrize("url", ["/n/status/", "/n/async/"])
def test_a_bearer_token_caller_gets_idempotency_without_a_custom_scope(
    wallet: Wallet, execution_log: Path, url: str
) -> None:
    """Before, every keyed request of an HttpBearer caller was refused 403
    (idempotency-anonymous-not-allowed): keys were scoped to ``request.user`` only."""
    key = str(uuid.uuid4())
    first, again = post(bearer("token-a"), url, key=key), post(bearer("token-a"), url, key=key)
    assert first.status_code == 201
    assert (again.status_code, again.content) == (201, first.content)
    assert again["Idempotent-Replayed"] == "true"
    assert executions(execution_log)[key] == 1


def test_two_tokens_never_share_records(wallet: Wallet, execution_log: Path) -> None:
    key = str(uuid.uuid4())
    a = post(bearer("token-a"), "/n/status/", key=key)
    b = post(bearer("token-b"), "/n/status/", key=key)
    assert a.status_code == b.status_code == 201
    assert "Idempotent-Replayed" not in b
    assert a.json()["id"] != b.json()["id"]
    assert executions(execution_log)[key] == 2
    scopes = set(IdempotencyRecord.objects.filter(key=key).values_list("scope", flat=True))
    assert len(scopes) == 2
    assert all(scope.startswith("token:") for scope in scopes)
    assert not any("token-a" in s or "token-b" in s for s in scopes)  # hashed, never in clear


def test_a_user_principal_is_the_users_scope_whichever_way_it_authenticated(
    user: Any, client_a: Client, wallet: Wallet, execution_log: Path
) -> None:
    """``request.auth`` a user (a token that names alice) and alice's session are one
    caller: the same key replays across them, and nobody else's does."""
    key = str(uuid.uuid4())
    first = post(bearer("user-token-alice"), "/n/status/", key=key)
    assert IdempotencyRecord.objects.get(key=key).scope == principal_scope(user)
    by_session = post(client_a, "/n/status/", key=key)
    assert (by_session.content, by_session["Idempotent-Replayed"]) == (first.content, "true")
    assert executions(execution_log)[key] == 1


def test_bob_never_gets_alices_response(
    user: Any, other_user: Any, wallet: Wallet, execution_log: Path
) -> None:
    key = str(uuid.uuid4())
    post(bearer("user-token-alice"), "/n/status/", key=key)
    bobs = post(bearer("user-token-bob"), "/n/status/", key=key)
    assert "Idempotent-Replayed" not in bobs
    assert executions(execution_log)[key] == 2


def test_authentication_runs_before_the_claim(wallet: Wallet, execution_log: Path) -> None:
    """A caller Ninja does not authenticate gets Ninja's 401: no claim, no record, no
    replay of anyone's response, and the key stays free."""
    key = str(uuid.uuid4())
    post(bearer("token-a"), "/n/status/", key=key)
    refused = post(bearer("wrong"), "/n/status/", key=key)
    assert refused.status_code == 401
    assert "Idempotent-Replayed" not in refused
    assert refused.json() == {"detail": "Unauthorized"}
    assert IdempotencyRecord.objects.filter(key=key).count() == 1
    assert executions(execution_log)[key] == 1


def test_an_anonymous_key_is_refused_by_default(wallet: Wallet, execution_log: Path) -> None:
    key = str(uuid.uuid4())
    response = post(Client(), "/n/open/", key=key)
    assert response.status_code == 403
    assert response.json()["code"] == "idempotency-anonymous-not-allowed"
    assert executions(execution_log)[key] == 0


def test_anonymous_ignore_runs_without_idempotency(wallet: Wallet, execution_log: Path) -> None:
    key = str(uuid.uuid4())
    with override_settings(IDEMPOTENCY={"ANONYMOUS": "ignore"}):
        answers = [post(Client(), "/n/open/", key=key) for _ in range(2)]
    assert [a.status_code for a in answers] == [201, 201]
    assert not any("Idempotent-Replayed" in a for a in answers)
    assert executions(execution_log)[key] == 2
    assert not IdempotencyRecord.objects.exists()


def test_a_principal_without_an_identity_is_anonymous(wallet: Wallet, execution_log: Path) -> None:
    """An object the default scope cannot name is never given a shared scope."""
    key = str(uuid.uuid4())
    response = post(bearer("nameless"), "/n/nameless/", key=key)
    assert response.status_code == 403
    assert response.json()["code"] == "idempotency-anonymous-not-allowed"
    assert executions(execution_log)[key] == 0


def test_principal_scopes_never_collide_across_kinds(user: Any) -> None:
    from django.contrib.auth.models import Group

    group = Group.objects.create(name="g")
    scopes = {
        principal_scope(user),
        principal_scope(group),
        principal_scope(str(user.pk)),
        principal_scope(f"user:{user.pk}"),
    }
    assert len(scopes) == 4
    assert principal_scope(group) == f"auth.group:{group.pk}"
    assert principal_scope("same") == principal_scope(b"same")
    assert principal_scope("") is None and principal_scope(object()) is None


def test_a_drf_request_is_scoped_to_its_user_not_its_token(user: Any) -> None:
    """DRF sets ``auth`` on the Django request too (its token): DRF keeps the user scope."""
    from rest_framework.authtoken.models import Token
    from rest_framework.request import Request
    from rest_framework.test import APIRequestFactory, force_authenticate

    token = Token.objects.get(user=user)
    django_request = APIRequestFactory().post("/")
    force_authenticate(django_request, user=user, token=token)
    request = Request(django_request)
    request.user  # noqa: B018 - authenticates, setting request._request.auth
    assert vars(django_request)["auth"] == token
    assert principal_of(request) == user


MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "idempotency.IdempotencyMiddleware",
]


@pytest.mark.parametrize("token", ["token-a", "user-token-alice"])
def test_the_middleware_lets_ninja_authenticate_first(
    user: Any, wallet: Wallet, execution_log: Path, token: str
) -> None:
    """Under IdempotencyMiddleware a Ninja operation takes its key after Ninja's own
    authentication (before, an HttpBearer caller got 403 on every keyed request)."""
    key = str(uuid.uuid4())
    with override_settings(MIDDLEWARE=MIDDLEWARE):
        first, again = (post(bearer(token), "/n/under-middleware/", key=key) for _ in range(2))
        refused = post(bearer("wrong"), "/n/under-middleware/", key=key)
    assert first.status_code == 201
    assert (again.content, again["Idempotent-Replayed"]) == (first.content, "true")
    assert refused.status_code == 401
    assert executions(execution_log)[key] == 1


def test_without_the_middleware_an_undecorated_operation_is_untouched(
    wallet: Wallet, execution_log: Path
) -> None:
    key = str(uuid.uuid4())
    answers = [post(bearer("token-a"), "/n/plain/", key=key) for _ in range(2)]
    assert [a.status_code for a in answers] == [201, 201]
    assert executions(execution_log)[key] == 2


@pytest.mark.parametrize("url", ["/n/async/", "/n/status/"])
def test_under_asgi_concurrent_duplicates_run_once_and_replay(
    wallet: Wallet, execution_log: Path, url: str
) -> None:
    """Django's ASGI handler (``AsyncClient``, in process): an async operation on the
    event loop, a sync one in Ninja's worker thread; five duplicates at once, then a
    retry, all with one bearer token and one key."""
    key = str(uuid.uuid4())
    client = AsyncClient()

    async def send() -> Any:
        return await client.post(
            url + "?sleep=0.05",
            data=json.dumps({"amount": 2}),
            content_type="application/json",
            headers={"Authorization": "Bearer token-a", "Idempotency-Key": key},
        )

    async def storm() -> list[Any]:
        return list(await asyncio.gather(*(send() for _ in range(5))))

    with override_settings(IDEMPOTENCY={"MODE": "lease"}):
        answers = async_to_sync(storm)()
        retry = async_to_sync(send)()
    done = [a for a in answers if a.status_code == 201]
    assert {a.status_code for a in answers} <= {201, 409}
    assert len([a for a in done if "Idempotent-Replayed" not in a]) == 1
    assert (retry.status_code, retry["Idempotent-Replayed"]) == (201, "true")
    assert all(a.content == retry.content for a in done)
    assert executions(execution_log)[key] == 1
