"""The built docs site, as a reader sees it in headless Chromium.

The site is built here (Sphinx, warnings as errors, as ``python3 dev.py docs`` does),
served from a thread on a free port, and read in a real browser: the home page and its
navigation, the search, highlighted code blocks, the benchmark chart and the settings
reference. ``IDEMPOTENCY_UPDATE_SCREENSHOTS=1`` writes the pictures of the home page and
the settings reference into ``docs/screenshots/``.
"""

from __future__ import annotations

import functools
import html
import http.server
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from idempotency.conf import DEFAULTS
from tests.docs.snippets import DOCS
from tests.support.chromium import Chromium

SCREENSHOTS = DOCS / "screenshots"

pytestmark = [
    pytest.mark.browser,
    # Sphinx and MyST announce their own future API changes while building
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sphinx.cmd.build import build_main

    out = tmp_path_factory.mktemp("site")
    status = build_main(["-W", "--keep-going", "-n", "-q", "-E", "-b", "html", str(DOCS), str(out)])
    assert status == 0, "the docs build failed (see the warnings above)"
    return out


@pytest.fixture(scope="module")
def site(built: Path) -> Iterator[str]:
    out = built
    handler = functools.partial(_QuietHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def _tall(chromium: Chromium, height: int) -> None:
    chromium.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1280, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


def _keep(png: bytes, name: str) -> None:
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20_000
    if os.environ.get("IDEMPOTENCY_UPDATE_SCREENSHOTS") == "1":
        (SCREENSHOTS / name).write_bytes(png)


def test_home_page_navigation_and_search(site: str, chromium: Chromium, tmp_path: Path) -> None:
    chromium.open(f"{site}/index.html", "/index.html")
    assert "django-idempotency" in chromium.evaluate("document.title")
    links = chromium.evaluate(
        "[...document.querySelectorAll('.sidebar-tree a')].map(a => a.textContent.trim())"
    )
    for title in ("Tutorial: a payment API that is safe to retry", "Settings", "Problem codes"):
        assert title in links
    _tall(chromium, 1000)
    _keep(chromium.screenshot(tmp_path / "home.png"), "docs-home.png")

    # the search box searches the site's own index (no network)
    chromium.open(f"{site}/search.html?q=RedisStore", "/search.html")
    chromium.wait_for(
        "document.querySelectorAll('#search-results li').length > 0", "search results"
    )
    found = chromium.evaluate(
        "[...document.querySelectorAll('#search-results li a')].map(a => a.textContent)"
    )
    assert any("store" in title.lower() for title in found), found


def test_settings_reference_lists_every_setting(
    site: str, chromium: Chromium, tmp_path: Path
) -> None:
    chromium.open(f"{site}/reference/settings.html", "/reference/settings.html")
    cells = chromium.evaluate(
        "[...document.querySelectorAll('table td:first-child code')].map(c => c.textContent)"
    )
    assert set(DEFAULTS) <= set(cells)
    _tall(chromium, 1400)
    _keep(chromium.screenshot(tmp_path / "settings.png"), "docs-settings.png")


def test_code_blocks_are_highlighted_and_the_chart_loads(site: str, chromium: Chromium) -> None:
    chromium.open(f"{site}/tutorial.html", "/tutorial.html")
    assert chromium.evaluate("document.querySelectorAll('div.highlight-python pre').length") > 3
    assert chromium.evaluate("document.querySelectorAll('.highlight .k').length") > 0  # keywords
    chromium.open(f"{site}/benchmarks.html", "/benchmarks.html")
    chromium.wait_for(
        "[...document.images].some(i => i.src.endsWith('.svg') && i.naturalWidth > 0)",
        "the benchmark chart",
    )


def test_generated_reference_tables(site: str, chromium: Chromium) -> None:
    """The generated pages are real tables with a row per problem class and check id."""
    from idempotency.check_messages import MESSAGES
    from idempotency.exceptions import IdempotencyError

    rows = "[...document.querySelectorAll('table tbody tr')].map(r => r.innerText)"
    chromium.open(f"{site}/reference/problems.html", "/reference/problems.html")
    problems = chromium.evaluate(rows)
    codes = {cls.default_code for cls in _subclasses(IdempotencyError)}
    assert {row.split()[0] for row in problems} >= codes
    assert any("422" in row and "idempotency-key-mismatch" in row for row in problems)
    chromium.open(f"{site}/reference/checks.html", "/reference/checks.html")
    checks = chromium.evaluate(rows)
    assert sorted(row.split()[0] for row in checks) == sorted(f"idempotency.{c}" for c in MESSAGES)


def _subclasses(cls: type) -> set[type]:
    import idempotency.calls  # noqa: F401  (defines a problem class too)

    found = set()
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("idempotency."):
            found |= {sub} | _subclasses(sub)
    return found


def test_every_link_to_an_anchor_of_the_site_finds_it(built: Path) -> None:
    """Sphinx checks the references it makes, not the links viewcode's source pages make
    back to the reference (one in eight of them once pointed at no anchor)."""
    pages = {page.resolve(): page.read_text() for page in built.rglob("*.html")}
    ids = {page: set(re.findall(r'\bid="([^"]+)"', text)) for page, text in pages.items()}
    broken = sorted(
        f"{page.relative_to(built.resolve())}: {target}#{anchor}"
        for page, text in pages.items()
        for target, anchor in re.findall(r'href="([^"#:]*\.html)?#([^"]+)"', text)
        if html.unescape(anchor) not in ids.get((page.parent / target).resolve(), {anchor})
    )
    assert len(pages) > 50 and sum(map(len, ids.values())) > 1000  # the site is there
    assert broken == []
