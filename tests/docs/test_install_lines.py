"""One install form that works today: a checkout or a built wheel, never the bare name.

No release of django-idempotency is published, so ``pip install django-idempotency`` (with
or without extras) finds nothing, and would install whatever someone else registers
under that name. The README, the docs, the changelog and the library's own messages
(check hints, errors, docstrings) name a checkout (``/path/to/django-idempotency``) or a
wheel (``dist/django_idempotency-...whl``) instead.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.services import ROOT

#: An installer given the distribution's bare name (a path or a wheel file is not).
BARE_NAME = re.compile(
    r"""(?:pip3? install|uv pip install|uv add|poetry add|pipenv install)"""
    r"""(?:\s+-{1,2}[\w-]+(?:[= ]\S+)?)*\s+["']?django-idempotency(?![\w/.-])"""
)

#: Every page and module a user reads an install line in.
READ = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "idempotency").rglob("*.py"),
    ]
)


def bare_lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), start=1)
        if BARE_NAME.search(line)
    ]


@pytest.mark.parametrize(
    "line",
    [
        "pip install django-idempotency",
        'pip install "django-idempotency[redis,celery]"',
        "   pip install 'django-idempotency[metrics]', or set METRICS to False.",
        "python -m pip install --upgrade django-idempotency[crypto]",
        "uv add django-idempotency",
    ],
)
def test_the_bare_name_is_found(line: str) -> None:
    assert BARE_NAME.search(line)


@pytest.mark.parametrize(
    "line",
    [
        'pip install "/path/to/django-idempotency[redis,celery,postgres]"',
        "pip install -e /path/to/django-idempotency",
        'pip install "dist/django_idempotency-0.1.0-py3-none-any.whl[redis]"',
        "pip install ./django-idempotency",
        "python -m pip install build",
    ],
)
def test_a_checkout_or_a_wheel_is_not(line: str) -> None:
    assert not BARE_NAME.search(line)


def test_no_page_or_message_installs_by_the_bare_name() -> None:
    assert len(READ) > 50  # the docs and the package were found
    found = [line for path in READ for line in bare_lines(path)]
    assert found == [], "install from a checkout or a wheel:\n" + "\n".join(found)
