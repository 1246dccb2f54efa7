"""The shop's checkout in a real browser (headless Chromium over DevTools, ``tests/chromium.py``).

The network is the browser's own: DevTools' Fetch domain pauses the pay requests at
their response, after the server answered, and the test lets each one through or fails
it as a reset connection would. Charges are counted from the database.

``IDEMPOTENCY_SCREENSHOTS=<dir>`` also saves the screenshots there (``docs/screenshots/``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from accounts.models import Account, LedgerEntry, LedgerEntryKind
from accounts.services import account_deposit, account_get_or_create_for_user
from orders.models import Order
from tests.support.chromium import Chromium, DevToolsError

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "demo-password"
PAY = "*/shop/checkout/pay/"
FORM = "*/shop/checkout/form/"
OUTCOME = "document.querySelector('#outcome')"


def screenshot(chromium: Chromium, tmp_path: Path, name: str) -> None:
    png = chromium.screenshot(tmp_path / name)
    assert png.startswith(b"\x89PNG")
    target = os.environ.get("IDEMPOTENCY_SCREENSHOTS")
    if target:
        shutil.copyfile(tmp_path / name, Path(target) / name)


@pytest.fixture
def shopper(db: None) -> User:
    user = User.objects.create_user("alice", password=PASSWORD)
    account = account_get_or_create_for_user(user=user)
    account_deposit(account_id=account.pk, amount=Decimal("1000.00"), reference="seed_alice")
    return user


@pytest.fixture
def shop(chromium: Chromium, live_server: Any, shopper: User) -> str:
    """Logged in as the shopper through the login form; the shop's base URL."""
    chromium.open(f"{live_server.url}/shop/login/", "/shop/login/")
    chromium.evaluate(
        "document.querySelector('#id_username').value = 'alice';"
        f"document.querySelector('#id_password').value = {json.dumps(PASSWORD)};"
        "document.querySelector('#login-form [type=submit]').click(); true"
    )
    chromium.wait_for(chromium.loaded("/shop/"), "the orders page after logging in")
    return str(live_server.url)


def charges(user: User) -> int:
    return LedgerEntry.objects.filter(account__user=user, kind=LedgerEntryKind.DEDUCTION).count()


def intercept(chromium: Chromium, pattern: str) -> None:
    """Pause every request to ``pattern`` once the server's answer has arrived."""
    chromium.send(
        "Fetch.enable", {"patterns": [{"urlPattern": pattern, "requestStage": "Response"}]}
    )


def paused(chromium: Chromium) -> dict[str, Any]:
    event = chromium.next_event("Fetch.requestPaused")
    event["key"] = next(
        (v for k, v in event["request"]["headers"].items() if k.lower() == "idempotency-key"), None
    )
    event["replayed"] = any(
        h["name"].lower() == "idempotent-replayed" and h["value"] == "true"
        for h in event.get("responseHeaders", [])
    )
    return event


def drop(chromium: Chromium, event: dict[str, Any]) -> None:
    """The answer is lost on its way: the page sees a reset connection."""
    chromium.send(
        "Fetch.failRequest", {"requestId": event["requestId"], "errorReason": "ConnectionReset"}
    )


def deliver(chromium: Chromium, event: dict[str, Any]) -> None:
    chromium.send("Fetch.continueRequest", {"requestId": event["requestId"]})


def wait_paid(chromium: Chromium) -> str:
    chromium.wait_for(f"{OUTCOME}.classList.contains('paid')", "the page to show 'paid'")
    return str(chromium.evaluate(f"{OUTCOME}.innerText"))


def test_a_double_click_charges_once(
    chromium: Chromium, shop: str, shopper: User, tmp_path: Path
) -> None:
    chromium.open(f"{shop}/shop/checkout/", "/shop/checkout/")
    chromium.evaluate("document.querySelector('#amount').value = '25.00'; true")
    screenshot(chromium, tmp_path, "checkout.png")
    chromium.click("#pay", count=2)  # a real double click
    text = wait_paid(chromium)
    order = Order.objects.get(user=shopper)
    assert f"Paid: order #{order.pk}, 25.00. Balance 975.00." in text
    sent = chromium.evaluate(
        "performance.getEntriesByType('resource')"
        ".filter(e => e.name.endsWith('/shop/checkout/pay/')).length"
    )
    assert sent == 1  # the button was disabled in flight: the second click sent nothing
    assert charges(shopper) == 1
    screenshot(chromium, tmp_path, "checkout-paid.png")
    chromium.click("#outcome a")
    chromium.wait_for(chromium.loaded(f"/shop/orders/{order.pk}/"), "the order page")
    assert "975.00" in chromium.text() and "pay_" in chromium.text()
    screenshot(chromium, tmp_path, "order.png")


def test_a_lost_answer_is_retried_with_the_same_key_and_charges_once(
    chromium: Chromium, shop: str, shopper: User
) -> None:
    chromium.open(f"{shop}/shop/checkout/", "/shop/checkout/")
    intercept(chromium, PAY)
    chromium.click("#pay")
    first = paused(chromium)
    assert first["responseStatusCode"] == 201 and not first["replayed"]  # charged ...
    assert charges(shopper) == 1
    drop(chromium, first)  # ... and the answer lost
    retry = paused(chromium)
    assert retry["key"] == first["key"] and retry["key"]
    assert retry["responseStatusCode"] == 201 and retry["replayed"]
    deliver(chromium, retry)
    text = wait_paid(chromium)
    order = Order.objects.get(user=shopper)
    assert f"order #{order.pk}" in text
    assert charges(shopper) == 1
    assert Account.objects.get(user=shopper).balance == Decimal("1000.00") - order.amount
    assert chromium.evaluate("sessionStorage.length") == 0  # the attempt is over


def test_a_request_in_progress_is_retried_after_its_retry_after(
    chromium: Chromium, shop: str, shopper: User
) -> None:
    """The first answer is replaced by the 409 a concurrent duplicate would get: the page
    waits the answer's Retry-After, then its retry gets the stored payment."""
    chromium.open(f"{shop}/shop/checkout/", "/shop/checkout/")
    intercept(chromium, PAY)
    chromium.click("#pay")
    first = paused(chromium)
    body = json.dumps({"code": "idempotency-request-in-progress", "status": 409}).encode()
    chromium.send(
        "Fetch.fulfillRequest",
        {
            "requestId": first["requestId"],
            "responseCode": 409,
            "responseHeaders": [
                {"name": "Content-Type", "value": "application/problem+json"},
                {"name": "Retry-After", "value": "2"},
            ],
            "body": base64.b64encode(body).decode(),
        },
    )
    answered = time.monotonic()
    retry = paused(chromium)
    assert time.monotonic() - answered >= 2.0  # not before the server said
    assert retry["key"] == first["key"] and retry["replayed"]
    deliver(chromium, retry)
    wait_paid(chromium)
    assert charges(shopper) == 1


def test_a_reload_during_the_retry_reuses_the_key(
    chromium: Chromium, shop: str, shopper: User
) -> None:
    chromium.open(f"{shop}/shop/checkout/", "/shop/checkout/")
    intercept(chromium, PAY)
    chromium.click("#pay")
    first = paused(chromium)
    drop(chromium, first)
    retry = paused(chromium)  # the page's retry, held: the customer reloads meanwhile
    chromium.send("Page.reload")
    resumed = paused(chromium)  # the reloaded page goes on with the stored attempt
    assert first["key"] == retry["key"] == resumed["key"]
    assert resumed["replayed"]
    deliver(chromium, resumed)
    wait_paid(chromium)
    assert Order.objects.filter(user=shopper).count() == 1
    assert charges(shopper) == 1


def test_the_classic_form_submitted_twice_makes_one_order(
    chromium: Chromium, shop: str, shopper: User, tmp_path: Path
) -> None:
    chromium.open(f"{shop}/shop/checkout/form/", "/shop/checkout/form/")
    intercept(chromium, FORM)
    button = chromium.center("#submit")  # measured now: the page is busy once submitted
    chromium.click(button)
    first = paused(chromium)  # the server placed the order; its answer is slow to come
    assert first["request"]["method"] == "POST" and first["responseStatusCode"] == 302
    chromium.click(button)  # impatient: a second submit of the same form
    second = paused(chromium)
    assert second["responseStatusCode"] == 409
    for event in (first, second):
        with contextlib.suppress(DevToolsError):  # the second submit cancelled the first
            deliver(chromium, event)
    chromium.wait_for("document.querySelector('#already-submitted') !== null", "the friendly page")
    order = Order.objects.get(user=shopper)  # one order
    assert "already placed" in chromium.text() and f"#{order.pk}" in chromium.text()
    assert charges(shopper) == 1
    screenshot(chromium, tmp_path, "form-already-submitted.png")
