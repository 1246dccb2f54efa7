"""``idempotency/tokens/base.py``: what a token is bound to (a principal named as scopes
name it, or a scope string), what issuing and consuming accept before a backend is asked,
what the backend's answer becomes (nothing, ``SubmitTokenUsed`` with the ``token_used``
signal, ``SubmitTokenInvalid``), the backends by alias, and the purge's batch size. On the
database backend (both backends under one contract: tests/tokens/test_tokens.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.utils import timezone

from idempotency import signals
from idempotency.exceptions import SubmitTokenInvalid, SubmitTokenUsed
from idempotency.models import SubmitToken
from idempotency.tokens import (
    DatabaseTokens,
    TokenBackend,
    consume_submit_token,
    get_token_backend,
    issue_token,
    purge_expired_submit_tokens,
    token_scope,
)
from idempotency.tokens.base import MAX_PURPOSE_LENGTH, MAX_TOKEN_LENGTH, hash_token
from tests.support.counting import received
from tests.support.stores import entry
from tests.support.users import make_user

pytestmark = pytest.mark.django_db


class Principal:
    """An authenticated principal of a custom DRF authentication: no model of its own."""

    is_authenticated = True

    def __init__(self, pk: int) -> None:
        self.pk = pk


def test_a_token_is_bound_to_a_scope_string_or_a_principal_as_scopes_name_it() -> None:
    user = make_user("scoped")
    assert token_scope("session:abc") == "session:abc"
    assert token_scope(user) == f"auth.user:{user.pk}"
    assert token_scope(Principal(user.pk)) not in {None, token_scope(user)}
    for nobody in ("", None, AnonymousUser(), object()):
        assert token_scope(nobody) is None


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"user_or_scope": AnonymousUser(), "purpose": "p"}, "authenticated user"),
        ({"user_or_scope": "s", "purpose": ""}, "non-empty"),
        ({"user_or_scope": "s", "purpose": None}, "non-empty"),
        ({"user_or_scope": "s", "purpose": "p" * (MAX_PURPOSE_LENGTH + 1)}, "at most"),
        ({"user_or_scope": "s", "purpose": "p", "ttl": 0}, "ttl must be positive"),
    ],
)
def test_issuing_refuses_what_cannot_be_bound(options: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        issue_token(**options)
    assert not SubmitToken.objects.exists()


def test_an_issued_token_is_random_and_only_its_hash_reaches_the_backend() -> None:
    before = timezone.now()
    issued = issue_token(user_or_scope="s", purpose="checkout", ttl=90)
    other = issue_token(user_or_scope="s", purpose="checkout", ttl=90)
    assert issued.token != other.token and len(issued.token) >= 43
    assert (issued.scope, issued.purpose) == ("s", "checkout")
    assert before + timedelta(seconds=90) <= issued.expires_at
    assert issued.expires_at <= timezone.now() + timedelta(seconds=90)
    row = SubmitToken.objects.get(token_hash=hash_token(issued.token))
    assert row.expires_at == issued.expires_at
    with override_settings(IDEMPOTENCY={"SUBMIT_TOKEN_TTL": 30}):
        default = issue_token(user_or_scope="s", purpose="checkout")
    assert default.expires_at <= timezone.now() + timedelta(seconds=30)


@pytest.mark.parametrize(
    ("token", "scope", "purpose"),
    [
        ("", "s", "p"),
        (None, "s", "p"),
        ("t" * (MAX_TOKEN_LENGTH + 1), "s", "p"),
        ("t", AnonymousUser(), "p"),
        ("t", "s", ""),
    ],
)
def test_what_cannot_be_a_token_is_invalid_without_asking_the_backend(
    token: Any, scope: Any, purpose: Any, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(0), pytest.raises(SubmitTokenInvalid):
        consume_submit_token(token=token, user_or_scope=scope, purpose=purpose)


def test_the_backends_answer_becomes_nothing_used_or_invalid() -> None:
    token = issue_token(user_or_scope="s", purpose="p").token
    with received(signals.token_used) as used:
        consume_submit_token(token=token, user_or_scope="s", purpose="p")
        assert used == []
        with pytest.raises(SubmitTokenUsed):
            consume_submit_token(token=token, user_or_scope="s", purpose="p")
        assert [(e["scope"], e["purpose"]) for e in used] == [("s", "p")]
        with pytest.raises(SubmitTokenInvalid):
            consume_submit_token(token=token, user_or_scope="other", purpose="p")
    assert len(used) == 1  # an invalid token is not a reuse


class Expiring(TokenBackend):
    """A backend whose tokens expire by themselves: it keeps the default purge."""

    def issue(self, token_hash: str, scope: str, purpose: str, ttl: float) -> datetime:
        return timezone.now()

    def consume(self, token_hash: str, scope: str, purpose: str) -> str:
        return "invalid"


def test_backends_by_alias_or_as_given_and_the_default_purge() -> None:
    given = Expiring()
    assert get_token_backend(given) is given
    assert given.purge(now=timezone.now(), batch_size=10) == 0
    tokens = {
        "default": entry("idempotency.tokens.DatabaseTokens"),
        "other": entry("idempotency.tokens.RedisTokens"),
    }
    with override_settings(IDEMPOTENCY={"TOKENS": tokens}):
        assert isinstance(get_token_backend(), DatabaseTokens)
        assert get_token_backend("default") is get_token_backend()
        assert type(get_token_backend("other")).__name__ == "RedisTokens"
        with pytest.raises(ImproperlyConfigured):
            get_token_backend("missing")


def test_the_purge_deletes_in_batches_of_the_setting_or_as_asked(
    django_assert_num_queries: Any,
) -> None:
    """A batch is a select of ids and a delete of them; the last select finds none."""
    later = timezone.now() + timedelta(hours=1)

    def expired(count: int) -> None:
        for n in range(count):
            issue_token(user_or_scope="s", purpose=f"p{n}", ttl=1)

    expired(5)
    with override_settings(IDEMPOTENCY={"PURGE_BATCH_SIZE": 2}), django_assert_num_queries(7):
        assert purge_expired_submit_tokens(now=later) == 5
    expired(5)
    with django_assert_num_queries(3):
        assert purge_expired_submit_tokens(now=later, batch_size=10) == 5
    expired(2)
    with override_settings(IDEMPOTENCY={"PURGE_BATCH_SIZE": 0}), django_assert_num_queries(5):
        assert purge_expired_submit_tokens(now=later) == 2  # at least one at a time
