"""A real browser for the tests: Playwright driving Debian's Chromium (no browser download).

Tests take pytest-playwright's ``page`` fixture and mark themselves ``browser``. This
plugin (registered by ``tests/conftest.py``) launches the system's ``chromium`` with
``executable_path``, so ``playwright install`` is never needed; pytest-playwright's own
options (``--headed``, ``--slowmo``, ``--tracing on``, ...) still apply.

Playwright lives for one test, not for the session as pytest-playwright has it: while its
sync API is started, its event loop is the running loop of the main thread, where Django
refuses ORM calls and ``async_to_sync``, and ``asyncio.run`` fails. Per test, the tests
after a browser test never see that loop; the browser test itself may use the ORM
(``DJANGO_ALLOW_ASYNC_UNSAFE``: the loop is Playwright's, idle while the test runs).

Without ``chromium`` on the PATH a test using it is skipped, unless
``IDEMPOTENCY_TEST_REQUIRE_SERVICES=1`` (CI), where it fails instead. Playwright itself is
imported only when a test starts it: ``tests/conftest.py`` loads where it is not
installed (the ``no-drf`` group).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.services import missing

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserType, Playwright

#: Chromium's switches: headless, no sandbox (root in CI), no GPU, and nothing it would
#: fetch or sync on its own (the tests run offline).
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1280, "height": 1000}


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """pytest-playwright's launch options, with Debian's Chromium and its switches."""
    executable = shutil.which("chromium")
    if executable is None:
        return browser_type_launch_args  # the ``playwright`` fixture skips (or fails)
    headed = browser_type_launch_args.get("headless") is False
    args = [arg for arg in ARGS if not (headed and arg == "--headless")]
    return {**browser_type_launch_args, "executable_path": executable, "args": args}


@pytest.fixture
def playwright(monkeypatch: pytest.MonkeyPatch) -> Iterator[Playwright]:
    if shutil.which("chromium") is None:
        missing("needs Chromium: apt-get install chromium (or touch .ci/needs-chromium)")
    # imported here: the plugin loads where Playwright is not installed (the no-drf run)
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    started = sync_playwright().start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def browser_type(playwright: Playwright, browser_name: str) -> BrowserType:
    return getattr(playwright, browser_name)  # type: ignore[no-any-return]


@pytest.fixture
def launch_browser(
    browser_type_launch_args: dict[str, Any], browser_type: BrowserType
) -> Callable[..., Browser]:
    def launch(**kwargs: Any) -> Browser:
        return browser_type.launch(**{**browser_type_launch_args, **kwargs})

    return launch


@pytest.fixture
def browser(launch_browser: Callable[..., Browser]) -> Iterator[Browser]:
    launched = launch_browser()
    try:
        yield launched
    finally:
        launched.close()


@pytest.fixture
def browser_context_args() -> dict[str, Any]:
    """Every page 1280 x 1000 (the tests reach ``live_server`` by its URL: no ``--base-url``,
    ``--device`` or ``--video`` here)."""
    return {"viewport": dict(VIEWPORT)}
