"""Users and the clients that call as them (DRF's API tokens where DRF is installed: the
``no-drf`` run, tests/settings_no_drf.py, has none)."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.test import Client


def has_tokens() -> bool:
    """Whether DRF's authtoken app is installed (not in tests/settings_no_drf.py)."""
    return apps.is_installed("rest_framework.authtoken")


def make_user(username: str) -> Any:
    """A user with the password ``pw``, and an API token where DRF is installed."""
    user = get_user_model().objects.create_user(username=username, password="pw")
    if has_tokens():
        from rest_framework.authtoken.models import Token

        Token.objects.get_or_create(user=user)
    return user


def token_client(user: Any) -> Client:
    """A test client authenticated by ``user``'s API token (DRF's)."""
    from rest_framework.authtoken.models import Token

    token = Token.objects.get(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token.key}", enforce_csrf_checks=False)


def logged_in_client(user: Any) -> Client:
    """A client whose session is logged in as ``user``: a token client where DRF is installed."""
    client = token_client(user) if has_tokens() else Client(enforce_csrf_checks=False)
    client.force_login(user)
    return client
