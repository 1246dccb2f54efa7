"""Users and the clients that call as them."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def make_user(username: str) -> Any:
    """A user with the password ``pw`` and an API token."""
    user = get_user_model().objects.create_user(username=username, password="pw")
    Token.objects.get_or_create(user=user)
    return user


def token_client(user: Any) -> Client:
    """A test client authenticated by ``user``'s API token."""
    token = Token.objects.get(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token.key}", enforce_csrf_checks=False)


def logged_in_client(user: Any) -> Client:
    """A token client whose session is logged in as ``user`` too."""
    client = token_client(user)
    client.force_login(user)
    return client


class KeyedAPIClient(APIClient):
    """Sends a fresh ``Idempotency-Key`` with every POST that names none, as a well-behaved
    client does (pay and deposit require one). Pass ``HTTP_IDEMPOTENCY_KEY=None`` to send none."""

    def post(self, path: str, data: Any = None, format: Any = None, **extra: Any) -> Any:  # noqa: A002
        extra.setdefault("HTTP_IDEMPOTENCY_KEY", str(uuid.uuid4()))
        if extra["HTTP_IDEMPOTENCY_KEY"] is None:
            del extra["HTTP_IDEMPOTENCY_KEY"]
        return super().post(path, data, format, **extra)


def keyed_client(user: Any) -> KeyedAPIClient:
    """A :class:`KeyedAPIClient` authenticated as ``user``; unexpected server errors become
    500 responses."""
    client = KeyedAPIClient(raise_request_exception=False)
    client.force_authenticate(user=user)
    return client
