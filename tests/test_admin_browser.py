"""The admin in a real browser (headless Chromium, see ``tests/chromium.py``).

The test logs in through the real login form.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from idempotency.models import IdempotencyRecord
from tests.support.chromium import Chromium
from tests.support.records import record

pytestmark = pytest.mark.browser


@pytest.mark.django_db(transaction=True)
def test_admin_in_a_real_browser(
    chromium: Chromium, live_server: Any, django_user_model: Any, tmp_path: Path
) -> None:
    django_user_model.objects.create_superuser("admin", "admin@example.com", "s3cret-pass")
    body = {"id": 42, "status": "created", "items": [{"sku": "A-1", "qty": 2}]}
    obj = record(
        key="browser-order-42",
        scope="user:1",
        body=json.dumps(body).encode(),
        headers=[["Content-Type", "application/json"], ["Location", "/api/orders/42/"]],
    )
    obj.save()
    changelist = "/admin/idempotency/idempotencyrecord/"

    # a real login through the form, CSRF token and session cookie included
    chromium.open(f"{live_server.url}/admin/login/?next={changelist}", "/admin/login/")
    chromium.evaluate(
        "document.querySelector('#id_username').value = 'admin';"
        "document.querySelector('#id_password').value = 's3cret-pass';"
        "document.querySelector('#login-form [type=submit]').click(); true"
    )
    chromium.wait_for(chromium.loaded(changelist), "the changelist after logging in")

    listing = chromium.text()
    assert "browser-order-42" in listing
    assert "user:1" in listing
    assert "Release selected records" in chromium.evaluate(
        "document.querySelector('select[name=action]').innerText"
    )
    chromium.screenshot(tmp_path / "changelist.png")

    detail = f"/admin/idempotency/idempotencyrecord/{obj.pk}/change/"
    chromium.open(f"{live_server.url}{detail}", detail)
    page = chromium.text()
    assert "browser-order-42" in page
    assert "/api/orders/42/" in page
    preview = chromium.evaluate(
        "document.querySelector('pre.idempotency-response-preview').innerText"
    )
    assert preview == json.dumps(body, indent=2)
    # read-only: the record cannot be edited in the page
    assert chromium.evaluate("document.querySelectorAll('input[name=key]').length") == 0

    # screenshots stay in pytest's tmp_path (pytest-of-<user>/pytest-current/) to look at
    png = chromium.screenshot(tmp_path / "record.png")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(png) > 10_000
    assert IdempotencyRecord.objects.filter(pk=obj.pk).exists()
