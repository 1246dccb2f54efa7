"""The shop's checkout in a real browser (Playwright on headless Chromium,
``tests/support/browser.py``).

The network is the browser's own: a Playwright route holds each pay request, lets it
reach the server (``route.fetch``), and the test then delivers the server's answer or
fails the request as a reset connection would. Charges are counted from the database.

``IDEMPOTENCY_SCREENSHOTS=<dir>`` also saves the screenshots there (``docs/screenshots/``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import APIResponse, Page, Route, expect
from playwright.sync_api import Error as PlaywrightError

from accounts.models import Account
from accounts.services import account_deposit, account_get_or_create_for_user
from orders.models import Order
from tests.support.ledger import charges

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "demo-password"
PAY = "**/shop/checkout/pay/"
FORM = "**/shop/checkout/form/"
TIMEOUT = 30.0


def screenshot(page: Page, tmp_path: Path, name: str) -> None:
    png = page.screenshot(path=tmp_path / name)
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
def shop(page: Page, live_server: Any, shopper: User) -> str:
    """Logged in as the shopper through the login form; the shop's base URL."""
    page.goto(f"{live_server.url}/shop/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("#login-form [type=submit]")
    page.wait_for_url(f"{live_server.url}/shop/")
    return str(live_server.url)


@dataclass
class Exchange:
    """One request the server has answered, its answer held back from the page."""

    route: Route
    response: APIResponse

    @property
    def key(self) -> str | None:
        return self.route.request.headers.get("idempotency-key")

    @property
    def replayed(self) -> bool:
        return self.response.headers.get("idempotent-replayed") == "true"

    def drop(self) -> None:
        """The answer is lost on its way: the page sees a reset connection."""
        self.route.abort("connectionreset")

    def deliver(self) -> None:
        self.route.fulfill(response=self.response)


class Wire:
    """Holds every request to ``pattern``: :meth:`next` sends the oldest to the server and
    returns the exchange, its answer not yet delivered."""

    def __init__(self, page: Page, pattern: str) -> None:
        self.page = page
        self.held: list[Route] = []
        page.route(pattern, self._hold)

    def _hold(self, route: Route) -> None:
        self.held.append(route)

    def next(self) -> Exchange:
        deadline = time.monotonic() + TIMEOUT
        while not self.held:  # Playwright calls the route handler while the page waits
            assert time.monotonic() < deadline, "the page sent no request"
            self.page.wait_for_timeout(50)
        route = self.held.pop(0)
        return Exchange(route, route.fetch(max_redirects=0))


def wait_paid(page: Page) -> str:
    outcome = page.locator("#outcome")
    expect(outcome).to_have_class("outcome paid", timeout=TIMEOUT * 1000)
    return outcome.inner_text()


def test_a_double_click_charges_once(page: Page, shop: str, shopper: User, tmp_path: Path) -> None:
    page.goto(f"{shop}/shop/checkout/")
    page.select_option("#amount", "25.00")
    screenshot(page, tmp_path, "checkout.png")
    page.dblclick("#pay")  # a real double click
    text = wait_paid(page)
    order = Order.objects.get(user=shopper)
    assert f"Paid: order #{order.pk}, 25.00. Balance 975.00." in text
    sent = page.evaluate(
        "performance.getEntriesByType('resource')"
        ".filter(e => e.name.endsWith('/shop/checkout/pay/')).length"
    )
    assert sent == 1  # the button was disabled in flight: the second click sent nothing
    assert charges(shopper) == 1
    screenshot(page, tmp_path, "checkout-paid.png")
    page.click("#outcome a")
    page.wait_for_url(f"{shop}/shop/orders/{order.pk}/")
    assert "975.00" in page.inner_text("body") and "pay_" in page.inner_text("body")
    screenshot(page, tmp_path, "order.png")


def test_a_lost_answer_is_retried_with_the_same_key_and_charges_once(
    page: Page, shop: str, shopper: User
) -> None:
    page.goto(f"{shop}/shop/checkout/")
    wire = Wire(page, PAY)
    page.click("#pay")
    first = wire.next()
    assert first.response.status == 201 and not first.replayed  # charged ...
    assert charges(shopper) == 1
    first.drop()  # ... and the answer lost
    retry = wire.next()
    assert retry.key == first.key and retry.key
    assert retry.response.status == 201 and retry.replayed
    retry.deliver()
    text = wait_paid(page)
    order = Order.objects.get(user=shopper)
    assert f"order #{order.pk}" in text
    assert charges(shopper) == 1
    assert Account.objects.get(user=shopper).balance == Decimal("1000.00") - order.amount
    assert page.evaluate("sessionStorage.length") == 0  # the attempt is over


def test_a_request_in_progress_is_retried_after_its_retry_after(
    page: Page, shop: str, shopper: User
) -> None:
    """The first answer is replaced by the 409 a concurrent duplicate would get: the page
    waits the answer's Retry-After, then its retry gets the stored payment."""
    page.goto(f"{shop}/shop/checkout/")
    wire = Wire(page, PAY)
    page.click("#pay")
    first = wire.next()
    # The clock starts before the answer goes out: the page cannot begin its wait earlier,
    # while a clock read after fulfill() returns starts late by the acknowledgement's trip
    # (CI once measured 1.98 s that way).
    sent = time.monotonic()
    first.route.fulfill(
        status=409,
        headers={"Content-Type": "application/problem+json", "Retry-After": "2"},
        body=json.dumps({"code": "idempotency-request-in-progress", "status": 409}),
    )
    retry = wire.next()
    assert time.monotonic() - sent >= 2.0  # not before the server said
    assert retry.key == first.key and retry.replayed
    retry.deliver()
    wait_paid(page)
    assert charges(shopper) == 1


def test_a_reload_during_the_retry_reuses_the_key(page: Page, shop: str, shopper: User) -> None:
    page.goto(f"{shop}/shop/checkout/")
    wire = Wire(page, PAY)
    page.click("#pay")
    first = wire.next()
    first.drop()
    retry = wire.next()  # the page's retry, held: the customer reloads meanwhile
    page.reload()
    resumed = wire.next()  # the reloaded page goes on with the stored attempt
    assert first.key == retry.key == resumed.key
    assert resumed.replayed
    resumed.deliver()
    wait_paid(page)
    assert Order.objects.filter(user=shopper).count() == 1
    assert charges(shopper) == 1


def test_the_classic_form_submitted_twice_makes_one_order(
    page: Page, shop: str, shopper: User, tmp_path: Path
) -> None:
    page.goto(f"{shop}/shop/checkout/form/")
    wire = Wire(page, FORM)
    box = page.locator("#submit").bounding_box()  # measured now: the page is busy once submitted
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.click(x, y)
    first = wire.next()  # the server placed the order; its answer is slow to come
    assert first.route.request.method == "POST" and first.response.status == 302
    page.mouse.click(x, y)  # impatient: a second submit of the same form
    second = wire.next()
    assert second.response.status == 409
    for exchange in (first, second):
        with contextlib.suppress(PlaywrightError):  # the second submit cancelled the first
            exchange.deliver()
    expect(page.locator("#already-submitted")).to_be_attached(timeout=TIMEOUT * 1000)
    order = Order.objects.get(user=shopper)  # one order
    text = page.inner_text("body")
    assert "already placed" in text and f"#{order.pk}" in text
    assert charges(shopper) == 1
    screenshot(page, tmp_path, "form-already-submitted.png")
