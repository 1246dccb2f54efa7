"""The built docs site, as a reader sees it in headless Chromium.

The site is built here (Sphinx, warnings as errors, as ``python3 dev.py docs`` does),
served from a thread on a free port, and read in a real browser (Playwright): the home page and its
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
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from idempotency.conf import DEFAULTS
from tests.docs.snippets import DOCS

SCREENSHOTS = DOCS / "screenshots"

pytestmark = [
    pytest.mark.browser,
    # Sphinx and MyST announce their own future API changes while building
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    # in a process of its own: autodoc (autodoc_preserve_defaults) rewrites the defaults
    # of the functions it documents, which would leak into the tests that run after
    build = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-E", "-b", "html"]
    status = subprocess.run([*build, str(DOCS), str(out)], check=False).returncode
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


def _tall(page: Page, height: int) -> None:
    page.set_viewport_size({"width": 1280, "height": height})


def _keep(png: bytes, name: str) -> None:
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20_000
    if os.environ.get("IDEMPOTENCY_UPDATE_SCREENSHOTS") == "1":
        (SCREENSHOTS / name).write_bytes(png)


def test_home_page_navigation_and_search(site: str, page: Page, tmp_path: Path) -> None:
    page.goto(f"{site}/index.html")
    assert "django-idempotency" in page.title()
    links = [text.strip() for text in page.locator(".sidebar-tree a").all_text_contents()]
    for title in ("Tutorial: a payment API that is safe to retry", "Settings", "Problem codes"):
        assert title in links
    _tall(page, 1000)
    _keep(page.screenshot(path=tmp_path / "home.png"), "docs-home.png")

    # the search box searches the site's own index (no network)
    page.goto(f"{site}/search.html?q=RedisStore")
    results = page.locator("#search-results li a")
    expect(results).not_to_have_count(0)
    found = results.all_text_contents()
    assert any("store" in title.lower() for title in found), found


def test_settings_reference_lists_every_setting(site: str, page: Page, tmp_path: Path) -> None:
    page.goto(f"{site}/reference/settings.html")
    cells = page.locator("table td:first-child code").all_text_contents()
    assert set(DEFAULTS) <= set(cells)
    _tall(page, 1400)
    _keep(page.screenshot(path=tmp_path / "settings.png"), "docs-settings.png")


def test_code_blocks_are_highlighted_and_the_results_table_renders(site: str, page: Page) -> None:
    page.goto(f"{site}/tutorial.html")
    assert page.locator("div.highlight-python pre").count() > 3
    assert page.locator(".highlight .k").count() > 0  # keywords
    page.goto(f"{site}/benchmarks.html")
    # the page shows one run as a table (the README's), a row per variant
    rows = page.locator("table tbody tr")
    assert rows.count() >= 5
    assert "DatabaseStore" in rows.first.inner_text()


def test_generated_reference_tables(site: str, page: Page) -> None:
    """The generated pages are real tables with a row per problem class and check id."""
    from idempotency.checks import MESSAGES
    from idempotency.exceptions import IdempotencyError

    rows = page.locator("table tbody tr")
    page.goto(f"{site}/reference/problems.html")
    problems = rows.all_inner_texts()
    codes = {cls.default_code for cls in _subclasses(IdempotencyError)}
    assert {row.split()[0] for row in problems} >= codes
    assert any("422" in row and "idempotency-key-mismatch" in row for row in problems)
    page.goto(f"{site}/reference/checks.html")
    checks = rows.all_inner_texts()
    assert sorted(row.split()[0] for row in checks) == sorted(f"idempotency.{c}" for c in MESSAGES)


def _subclasses(cls: type) -> set[type]:
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
