"""A real browser for the tests: Debian's headless Chromium, driven over DevTools.

No Selenium or Playwright: Chromium speaks the Chrome DevTools Protocol over a
pair of pipes (``--remote-debugging-pipe``: it reads commands on fd 3 and
writes replies on fd 4, each a JSON text ended by a NUL byte), which the small
client below talks to directly. Tests take the ``chromium`` fixture (registered
as a plugin by ``tests/conftest.py``) and mark themselves ``browser``.

Without ``chromium`` on the PATH a test using it is skipped, unless
``IDEMPOTENCY_TEST_REQUIRE_SERVICES=1`` (CI), where it fails instead.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REQUIRE_SERVICES = os.environ.get("IDEMPOTENCY_TEST_REQUIRE_SERVICES") == "1"
TIMEOUT = 30.0

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
    "--remote-debugging-pipe",
]


class DevToolsError(RuntimeError):
    pass


def _high_fd(fd: int) -> int:
    """``fd`` moved to a number >= 10, so it can never collide with fds 3 and 4."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Chromium:
    """A headless Chromium process and one page, driven over the DevTools pipe."""

    def __init__(self, executable: str, profile: Path, log: Path) -> None:
        to_browser_r, to_browser_w = (_high_fd(fd) for fd in os.pipe())
        from_browser_r, from_browser_w = (_high_fd(fd) for fd in os.pipe())
        # bash (dash takes single-digit fds only) puts the pipe ends on fds 3 and 4,
        # then becomes Chromium
        script = f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w}'
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            ["/bin/bash", "-c", script, executable, *FLAGS, f"--user-data-dir={profile}"],
            pass_fds=(to_browser_r, from_browser_w),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._out = to_browser_w
        self._in = from_browser_r
        self._buffer = b""
        self._next_id = 0
        #: events received and not yet taken (``next_event``), oldest first
        self.events: list[dict[str, Any]] = []
        self.session = ""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]

    # -- the protocol -----------------------------------------------------------------

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one command (to the page once attached) and return its result."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session:
            message["sessionId"] = self.session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._out, data) :]
        deadline = time.monotonic() + TIMEOUT
        while True:
            reply = self._receive(deadline)
            if "method" in reply and "id" not in reply:
                self.events.append(reply)  # an event: kept for next_event()
                continue
            if reply.get("id") != self._next_id:
                continue  # a reply to a command of the past
            if "error" in reply:
                raise DevToolsError(f"{method}: {reply['error']}")
            return reply.get("result", {})  # type: ignore[no-any-return]

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DevToolsError("Chromium did not answer in time")
            readable, _, _ = select.select([self._in], [], [], remaining)
            if readable:
                chunk = os.read(self._in, 1 << 20)
                if not chunk:
                    raise DevToolsError("Chromium closed the DevTools pipe")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)  # type: ignore[no-any-return]

    def next_event(self, method: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The params of the oldest unseen ``method`` event, waiting for one if need be
        (only the domains a test enabled send events, e.g. ``Fetch.enable``)."""
        deadline = time.monotonic() + timeout
        while True:
            for index, event in enumerate(self.events):
                if event["method"] == method:
                    del self.events[index]
                    return event.get("params", {})  # type: ignore[no-any-return]
            message = self._receive(deadline)
            if "method" in message and "id" not in message:
                self.events.append(message)

    # -- what the test needs ----------------------------------------------------------

    def center(self, selector: str) -> tuple[float, float]:
        """The viewport coordinates of the middle of the element ``selector``."""
        x, y = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        return float(x), float(y)

    def click(self, selector: str | tuple[float, float], count: int = 1) -> None:
        """Real mouse clicks (press and release, ``count`` times in a row, as a double
        click is) on the middle of the element ``selector``, or at ``(x, y)``."""
        x, y = self.center(selector) if isinstance(selector, str) else selector
        for number in range(1, count + 1):
            for kind in ("mousePressed", "mouseReleased"):
                self.send(
                    "Input.dispatchMouseEvent",
                    {"type": kind, "x": x, "y": y, "button": "left", "clickCount": number},
                )

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise DevToolsError(f"{expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str) -> None:
        """Poll until ``expression`` is true in the page (across navigations)."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                if self.evaluate(expression):
                    return
            except DevToolsError:
                pass  # the page is between documents
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; page: {self.text()[:500]!r}")

    def open(self, url: str, path: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.wait_for(self.loaded(path), f"{path} to load")

    @staticmethod
    def loaded(path: str) -> str:
        return f"location.pathname === {json.dumps(path)} && document.readyState === 'complete'"

    def text(self) -> str:
        try:
            return str(self.evaluate("document.body ? document.body.innerText : ''"))
        except DevToolsError:
            return ""

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])
        path.write_bytes(data)
        return data

    def close(self) -> None:
        try:
            self.session = ""
            self.send("Browser.close")
        except (DevToolsError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        for fd in (self._out, self._in):
            os.close(fd)
        self._log.close()


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Chromium]:
    executable = shutil.which("chromium")
    if executable is None:
        reason = "needs Chromium: apt-get install chromium (or touch .ci/needs-chromium)"
        if REQUIRE_SERVICES:
            pytest.fail(f"required service missing: {reason}")
        pytest.skip(reason)
    browser = Chromium(executable, tmp_path / "profile", tmp_path / "chromium.log")
    try:
        yield browser
    finally:
        browser.close()
