"""The admin in a real browser (Playwright on headless Chromium, ``tests/support/browser.py``).

The test logs in through the real login form.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from idempotency.models import IdempotencyRecord
from tests.support.records import record

pytestmark = pytest.mark.browser


@pytest.mark.django_db(transaction=True)
def test_admin_in_a_real_browser(
    page: Page, live_server: Any, django_user_model: Any, tmp_path: Path
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
    page.goto(f"{live_server.url}/admin/login/?next={changelist}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "s3cret-pass")
    page.click("#login-form [type=submit]")
    page.wait_for_url(f"{live_server.url}{changelist}")

    listing = page.inner_text("body")
    assert "browser-order-42" in listing
    assert "user:1" in listing
    expect(page.locator("select[name=action]")).to_contain_text("Release selected records")
    page.screenshot(path=tmp_path / "changelist.png")

    # on a 1280-pixel screen, beside the sidebar and the filters, every column shows: the
    # list's box does not scroll sideways (it once hid the dates and the expiry)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.reload()
    assert "expires" in page.inner_text("#result_list thead").lower()
    widths = page.evaluate(
        "(() => { const box = document.querySelector('#changelist .results');"
        " return [box.scrollWidth, box.clientWidth]; })()"
    )
    assert widths[0] <= widths[1], widths
    assert "completed 201" in page.inner_text("#result_list tbody")

    page.goto(f"{live_server.url}/admin/idempotency/idempotencyrecord/{obj.pk}/change/")
    text = page.inner_text("body")
    assert "browser-order-42" in text
    assert "/api/orders/42/" in text
    preview = page.inner_text("pre.idempotency-response-preview")
    assert preview == json.dumps(body, indent=2)
    # read-only: the record cannot be edited in the page
    expect(page.locator("input[name=key]")).to_have_count(0)

    # screenshots stay in pytest's tmp_path (pytest-of-<user>/pytest-current/) to look at
    png = page.screenshot(path=tmp_path / "record.png")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(png) > 10_000
    assert IdempotencyRecord.objects.filter(pk=obj.pk).exists()
