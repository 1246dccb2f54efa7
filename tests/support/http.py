"""One keyed JSON request, as most HTTP tests send it."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.test import Client

H = "HTTP_IDEMPOTENCY_KEY"


def new_key() -> str:
    return str(uuid.uuid4())


def post(client: Client, url: str, body: Any = None, key: str | None = None, **extra: Any) -> Any:
    """``POST`` ``body`` (``{"amount": 5}`` by default) as JSON, with ``key`` if given."""
    if key is not None:
        extra[H] = key
    return client.post(
        url, data=json.dumps(body or {"amount": 5}), content_type="application/json", **extra
    )
