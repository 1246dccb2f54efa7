"""DRF's test client as the sample's API tests use it: a fresh key on every POST."""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework.test import APIClient


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
