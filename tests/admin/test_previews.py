"""The admin's preview of a stored body (idempotency.admin.previews): JSON, text, binary,
empty and long bodies, and bodies as the store wrote them."""

from __future__ import annotations

import json

import pytest

from idempotency.admin import body_preview
from idempotency.models import IdempotencyRecord
from idempotency.stores.base import StoredResponse
from idempotency.stores.database import DatabaseStore

pytestmark = pytest.mark.django_db


def test_preview_of_json_text_binary_and_empty_bodies() -> None:
    assert body_preview(b'{"b":1,"a":[true]}') == '{\n  "b": 1,\n  "a": [\n    true\n  ]\n}'
    assert body_preview("héllo\nworld".encode()) == "héllo\nworld"
    assert body_preview(b"") == "(empty body)"
    binary = body_preview(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100)
    assert binary.startswith("<108 bytes of binary data>\n00000000  89 50 4e 47 0d 0a 1a 0a")
    assert binary.endswith("\n…")
    assert body_preview(b"\x01") == "<1 byte of binary data>\n00000000  01"


def test_preview_truncates_long_bodies() -> None:
    body = json.dumps([{"n": i} for i in range(2000)]).encode()

    preview = body_preview(body, limit=4096)

    assert preview.startswith('[\n  {\n    "n": 0\n  },')
    assert preview.endswith(f"\n… (truncated, {len(body)} bytes)")
    assert len(preview) < 4200

    text = body_preview(b"x" * 10000, limit=100)
    assert text == "x" * 100 + "\n… (truncated, 10000 bytes)"


def test_stored_responses_preview_as_the_store_wrote_them() -> None:
    # a record completed through the store API renders like one made by hand
    store = DatabaseStore()
    claim = store.claim("user:1", "via-store", fingerprint="f" * 64, lease=60, ttl=60)
    response = StoredResponse(201, [("Content-Type", "application/json")], b'{"ok":true}')
    assert store.complete("user:1", "via-store", fence=claim.fence, response=response, ttl=60)

    obj = IdempotencyRecord.objects.get(key="via-store")

    assert body_preview(bytes(obj.response_body or b"")) == '{\n  "ok": true\n}'
