"""Fixtures of the sample project's tests."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.support.api_clients import keyed_client
from tests.support.factories import UserFactory


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


@pytest.fixture
def api_client(user: User) -> APIClient:
    """A client authenticated as ``user``; unexpected server errors become 500 responses."""
    return keyed_client(user)


@pytest.fixture
def merchant(db: None) -> User:
    return UserFactory(username="shopkeeper", is_staff=True)


@pytest.fixture
def staff_client(merchant: User) -> APIClient:
    """A client authenticated as a staff user (who ships and completes orders)."""
    return keyed_client(merchant)


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient(raise_request_exception=False)
