"""Fixtures of the sample project's tests."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.sample.factories import UserFactory


@pytest.fixture(autouse=True)
def _fast_password_hasher(settings: Any) -> None:
    """Hash test passwords cheaply; PBKDF2's deliberate slowness only slows the suite."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def user(db: None) -> User:
    return UserFactory(username="alice")


@pytest.fixture
def other_user(db: None) -> User:
    return UserFactory(username="mallory")


class KeyedAPIClient(APIClient):
    """Sends a fresh ``Idempotency-Key`` with every POST that names none, as a well-behaved
    client does (pay and deposit require one). Pass ``HTTP_IDEMPOTENCY_KEY=None`` to send none."""

    def post(self, path: str, data: Any = None, format: Any = None, **extra: Any) -> Any:  # noqa: A002
        extra.setdefault("HTTP_IDEMPOTENCY_KEY", str(uuid.uuid4()))
        if extra["HTTP_IDEMPOTENCY_KEY"] is None:
            del extra["HTTP_IDEMPOTENCY_KEY"]
        return super().post(path, data, format, **extra)


@pytest.fixture
def api_client(user: User) -> APIClient:
    """A client authenticated as ``user``; unexpected server errors become 500 responses."""
    client = KeyedAPIClient(raise_request_exception=False)
    client.force_authenticate(user=user)
    return client


@pytest.fixture
def merchant(db: None) -> User:
    return UserFactory(username="shopkeeper", is_staff=True)


@pytest.fixture
def staff_client(merchant: User) -> APIClient:
    """A client authenticated as a staff user (who ships and completes orders)."""
    client = KeyedAPIClient(raise_request_exception=False)
    client.force_authenticate(user=merchant)
    return client


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient(raise_request_exception=False)
