"""What is kept of a response (issue 36, finding 6): status only, redacted fields,
``Cache-Control: no-store``, read back raw from every store (the library's own token
endpoints, DRF's: tests/contrib/drf/test_tokens.py)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

from idempotency.http.responses import redacted
from idempotency.stores.base import StoredResponse
from tests.support.at_rest import stored_anywhere
from tests.support.stores import STORE_VARIANTS
from tests.testapp.executions import executions

pytestmark = pytest.mark.django_db(transaction=True)

PAN, CVV = "4111111111111111", "737"


def pay(client: Client, url: str, key: str) -> Any:
    return client.post(
        url,
        data=json.dumps({"pan": PAN, "cvv": CVV}),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def twice(client: Client, url: str) -> tuple[Any, Any, str]:
    key = str(uuid.uuid4())
    return pay(client, url, key), pay(client, url, key), key


def assert_status_only(first: Any, again: Any) -> None:
    assert first.status_code == again.status_code == 201
    assert PAN.encode() in first.content
    assert again.content == b""
    assert again["Idempotent-Replayed"] == "true"
    assert "Content-Type" not in again


def test_a_status_only_view_replays_its_status_and_stores_no_body(
    store_variant: str, client_a: Client, execution_log: Path
) -> None:
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[store_variant]):
        first, again, key = twice(client_a, "/t/data/status-only/")
        assert_status_only(first, again)
        assert again["Location"] == first["Location"] == "/payments/pay_1"
        assert not stored_anywhere(PAN.encode())
    assert executions(execution_log)[key] == 1


def test_the_status_only_setting_applies_to_every_view(
    store_variant: str, client_a: Client, execution_log: Path
) -> None:
    with override_settings(IDEMPOTENCY={**STORE_VARIANTS[store_variant], "STATUS_ONLY": True}):
        first, again, key = twice(client_a, "/t/data/echo/")
        assert_status_only(first, again)
        assert not stored_anywhere(PAN.encode())
    assert executions(execution_log)[key] == 1


def test_a_no_store_answer_is_kept_status_only(
    store_variant: str, client_a: Client, execution_log: Path
) -> None:
    """``Cache-Control: no-store`` (here from ``@never_cache``) was ignored: the body
    was stored for 24 h like any other."""
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[store_variant]):
        first, again, key = twice(client_a, "/t/data/no-store/")
        assert "no-store" in first["Cache-Control"]
        assert_status_only(first, again)
        assert not stored_anywhere(PAN.encode())
    assert executions(execution_log)[key] == 1


def test_redacted_fields_are_stored_and_replayed_redacted(
    store_variant: str, client_a: Client, execution_log: Path
) -> None:
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[store_variant]):
        first, again, key = twice(client_a, "/t/data/redacted/")
        assert first.status_code == again.status_code == 201
        assert json.loads(first.content)["card"]["pan"] == PAN
        assert json.loads(again.content) == {
            "payment": "pay_1",
            "card": {"pan": "[redacted]", "brand": "visa"},
            "cvv": "[redacted]",
        }
        assert not stored_anywhere(PAN.encode())
        assert not stored_anywhere(f'"{CVV}"'.encode())
    assert executions(execution_log)[key] == 1


def test_the_redact_setting_adds_to_every_view_and_leaves_other_bodies_byte_for_byte(
    client_a: Client,
) -> None:
    with override_settings(IDEMPOTENCY={"REDACT_FIELDS": ["pan"]}):
        first, again, _key = twice(client_a, "/t/data/echo/")
        assert json.loads(again.content)["card"]["pan"] == "[redacted]"
        assert json.loads(again.content)["cvv"] == CVV
    with override_settings(IDEMPOTENCY={"REDACT_FIELDS": ["iban"]}):
        first, again, _key = twice(client_a, "/t/data/echo/")
        assert again.content == first.content


def test_a_body_that_is_not_json_is_kept_status_only_when_fields_are_named() -> None:
    html = StoredResponse(200, [("Content-Type", "text/html")], b"<p>4111</p>")
    assert redacted(html, {"pan"}) == StoredResponse(200, [], b"")
    broken = StoredResponse(200, [("Content-Type", "application/json")], b"{no")
    assert redacted(broken, {"pan"}).body == b""
    problem = StoredResponse(
        422, [("Content-Type", "application/problem+json")], b'{"pan": "1", "a": [{"pan": 2}]}'
    )
    assert json.loads(redacted(problem, {"pan"}).body) == {
        "pan": "[redacted]",
        "a": [{"pan": "[redacted]"}],
    }
